#!/usr/bin/env python3
"""PyTorch reference for attnlab's optimizers, lr schedules and gradient clipping.

Writes tests/data/optim_reference.json, which tests/test_optim.cpp reads (the
C++ tests do not need PyTorch). Rerun after changing a case:

    /usr/bin/python3 scripts/pytorch/torch_optim_reference.py

Everything runs in float64, so the fixture is the exact trajectory up to
double rounding; the C++ side runs in float32 and is compared with a stated
tolerance. Initial values and noise are multiples of 1/64, exactly
representable in float32, so both sides start from identical numbers.

The gradient of every parameter at every step is g = 2 * p + noise (the
gradient of sum(p^2 + noise * p)), recomputed from the current parameters,
so each step depends on the whole trajectory so far. One parameter
("head.weight") never gets a gradient and must stay unchanged.
"""
import json
import math
import os

import torch

from attnlab_runs.launch import ROOT
from attnlab_runs.mirror import no_decay

OUT = os.path.join(ROOT, "tests", "data", "optim_reference.json")

torch.set_default_dtype(torch.float64)

# name, shape, initial values (multiples of 1/64), whether it gets a gradient
PARAMS = [
    ("fc.weight", [2, 3], [0.5, -1.25, 0.75, 1.5, -0.625, 1.0], True),
    ("fc.bias", [2], [0.25, -0.5], True),
    ("ln1.weight", [3], [1.0, 0.875, 1.125], True),
    ("tok_emb.weight", [2, 2], [0.375, -0.75, 1.25, -1.5], True),
    ("scale", [], [0.6875], True),  # a 0-d parameter, decayed
    ("head.weight", [2], [0.3125, -0.4375], False),
]


def noise_for(index, numel):
    # fixed, deterministic, multiples of 1/16 in [-5/16, 5/16]
    return [((index * 5 + i * 7) % 11 - 5) / 16.0 for i in range(numel)]


def make_params():
    out = []
    for index, (name, shape, values, has_grad) in enumerate(PARAMS):
        p = torch.tensor(values).reshape(shape).clone().requires_grad_(True)
        noise = torch.tensor(noise_for(index, len(values))).reshape(shape)
        out.append((name, p, noise, has_grad))
    return out


def set_grads(params):
    for _, p, noise, has_grad in params:
        p.grad = (2 * p.detach() + noise) if has_grad else None


def snapshot(params):
    return {name: p.detach().reshape(-1).tolist() for name, p, _, _ in params}


def param_groups(params, weight_decay, decay_all):
    if decay_all:
        return [{"params": [p for _, p, _, _ in params], "weight_decay": weight_decay}]
    decay = [p for name, p, _, _ in params if not no_decay(name)]
    rest = [p for name, p, _, _ in params if no_decay(name)]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def make_torch_optimizer(cfg, params):
    groups = param_groups(params, cfg["weight_decay"], cfg["decay_all"])
    if cfg["name"] == "sgd":
        return torch.optim.SGD(groups, lr=cfg["lr"], momentum=cfg["momentum"], nesterov=cfg["nesterov"])
    cls = torch.optim.Adam if cfg["name"] == "adam" else torch.optim.AdamW
    return cls(groups, lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"])


def config(name, lr, momentum=0.0, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, nesterov=False,
           decay_all=False):
    return dict(name=name, lr=lr, momentum=momentum, beta1=beta1, beta2=beta2, eps=eps,
                weight_decay=weight_decay, nesterov=nesterov, decay_all=decay_all)


OPTIMIZERS = [
    ("sgd", config("sgd", 0.1)),
    ("sgd_momentum_wd", config("sgd", 0.1, momentum=0.9, weight_decay=0.05)),
    ("sgd_nesterov", config("sgd", 0.05, momentum=0.8, nesterov=True)),
    ("adam", config("adam", 0.1)),
    ("adam_l2", config("adam", 0.05, beta1=0.85, beta2=0.99, eps=1e-7, weight_decay=0.1)),
    ("adamw", config("adamw", 0.1, beta1=0.8, beta2=0.95, eps=1e-6, weight_decay=0.2)),
    ("adamw_decay_all", config("adamw", 0.1, weight_decay=0.2, decay_all=True)),
]


# The schedules written independently of the C++ code, as functions of the
# 1-based step k (the lr of the k-th update); see framework/optim/schedule.h.
def schedule_lr(s, base, k):
    w = s["warmup"]
    if s["name"] == "noam":
        return base * s["d_model"] ** -0.5 * min(k ** -0.5, k * w ** -1.5)
    if k <= w:
        return base * k / w
    if s["name"] == "constant":
        return base
    q = min(max((k - w) / (s["total_steps"] - w), 0.0), 1.0)
    shape = 1 - q if s["name"] == "linear" else 0.5 * (1 + math.cos(math.pi * q))
    return s["min_lr"] + (base - s["min_lr"]) * shape


def schedule(name, warmup=0, total_steps=0, min_lr=0.0, d_model=0):
    return dict(name=name, warmup=warmup, total_steps=total_steps, min_lr=min_lr, d_model=d_model)


SCHEDULES = [
    ("constant_warmup", schedule("constant", warmup=3), 0.1, 6),
    ("linear", schedule("linear", warmup=2, total_steps=6, min_lr=0.01), 0.1, 8),
    ("cosine", schedule("cosine", warmup=2, total_steps=6, min_lr=0.01), 0.1, 8),
    ("cosine_no_warmup", schedule("cosine", total_steps=5), 0.1, 6),
    ("noam", schedule("noam", warmup=3, d_model=16), 2.0, 6),
]
SCHEDULE_OPTIMIZER = config("sgd", 1.0, momentum=0.9)  # lr is replaced by the schedule


def run_optimizer(cfg, steps, sched=None):
    params = make_params()
    opt = make_torch_optimizer(cfg, params)
    scheduler = None
    if sched is not None:
        s, base = sched
        for g in opt.param_groups:
            g["lr"] = base
        # LambdaLR's epoch e (0-based) drives update k = e + 1.
        scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: schedule_lr(s, base, e + 1) / base)
    out = []
    for _ in range(steps):
        lr = opt.param_groups[0]["lr"]
        set_grads(params)
        opt.step()
        if scheduler is not None:
            scheduler.step()
        out.append({"lr": lr, "params": snapshot(params)})
    return out


def check_warmup_against_linear_lr():
    """Cross-check the warmup convention with torch's own LinearLR."""
    w, base = 3, 0.1
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=base)
    sched = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1 / w, end_factor=1.0, total_iters=w - 1)
    for k in range(1, 7):
        expected = schedule_lr(schedule("constant", warmup=w), base, k)
        assert abs(opt.param_groups[0]["lr"] - expected) < 1e-15, (k, opt.param_groups[0]["lr"], expected)
        opt.step()
        sched.step()


def clip_cases():
    out = []
    for max_norm in (1.0, 100.0):
        params = make_params()
        set_grads(params)
        tensors = [p for _, p, _, _ in params]
        norm = torch.nn.utils.clip_grad_norm_(tensors, max_norm)
        grads = {name: p.grad.reshape(-1).tolist() for name, p, _, has in params if has}
        out.append({"max_norm": max_norm, "norm": float(norm), "grads": grads})
    return out


def main():
    check_warmup_against_linear_lr()
    data = {
        "generator": "scripts/pytorch/torch_optim_reference.py",
        "torch_version": torch.__version__,
        "gradient": "g = 2 * p + noise, recomputed from the current parameters before every step",
        "params": [
            {"name": name, "shape": shape, "init": values, "noise": noise_for(i, len(values)), "has_grad": has}
            for i, (name, shape, values, has) in enumerate(PARAMS)
        ],
        "optimizers": [
            {"label": label, "config": cfg, "steps": run_optimizer(cfg, 3)} for label, cfg in OPTIMIZERS
        ],
        "schedules": [
            {"label": label, "schedule": s, "base_lr": base, "optimizer": SCHEDULE_OPTIMIZER,
             "steps": run_optimizer(SCHEDULE_OPTIMIZER, n, (s, base))}
            for label, s, base, n in SCHEDULES
        ],
        "clip": clip_cases(),
    }
    with open(OUT, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
