#!/usr/bin/env python3
"""Loads an attnlab checkpoint as a PyTorch module, and answers as `attnlab predict` does.

    import attnlab_torch
    model = attnlab_torch.load("runs/rev")            # a run directory (latest checkpoint) or a .safetensors file
    logits = model({"src": torch.tensor([[7, 5, 8]])})  # (B, T, V), float64; ids as attnlab's (specials 0..3)

    attnlab_torch.py runs/rev --predict "3 1 4"        # prints attnlab predict's first line

The module is scripts/pytorch/torch_reference.py's Model (the PyTorch reference the parity
fixtures come from; parameter names as attnlab's), built from the checkpoint's own
"model_config" metadata, for the three model kinds and every option of
models/config.h. Anything this file does not know (a config field, a value, a
parameter name or shape) is refused by name: never a silent mismatch. The
weights are float32 in the file and are computed with in float64.

--predict takes the vocabulary from the checkpoint's own "vocabulary" metadata
(training/checkpoints.h; so a pairs run answers too, with a decoder or seq2seq),
or from the run's config.ini for a checkpoint written before it (the generated
tasks only); a text run (a language model) is refused, as by attnlab predict. It decodes
as attnlab predict does: the encoder tagger gives one token per input position
(cut to the correct answer's length), the decoder reads [bos] INPUT [sep] and
stops at <eos>, one token past the expected answer (decoding_budget) or when
the sequence fills the positional table (with --layout bare it reads INPUT and
answers exactly the expected answer's length: no <eos>), seq2seq stops at <eos>, one token past
the expected answer or after max_len steps. A model trained with
--random-positions reads the positions attnlab reads: spread over each
sequence's length in a forward, and decoding_positions in a decoding.
Errors: one line on stderr, exit 2 for a bad input or file, 1 otherwise.
"""
import argparse
import glob
import json
import math
import os
import re
import struct
import sys

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import torch_reference as ref  # noqa: E402
from attnlab_runs import safetensors  # noqa: E402  (the hand-written reader)

PAD, BOS, EOS, SEP = ref.PAD, ref.BOS, ref.EOS, ref.SEP
SPECIALS = ["<pad>", "<bos>", "<eos>", "<sep>"]


class LoadError(ValueError):
    """A file or value attnlab_torch cannot represent; the message names it."""


# ---- checkpoints -----------------------------------------------------------------

CONFIG_FIELDS = {  # models/config.h, with the values this loader can build
    "arch": ("encoder", "decoder", "seq2seq"), "vocab_size": int, "max_len": int, "d_model": int, "n_heads": int,
    "n_layers": int, "d_ff": int, "d_k": int, "d_v": int, "positional": ("sinusoidal", "learned", "rope", "none"),
    "norm": ("pre", "post", "none"), "attn_scale": str, "activation": ("relu", "gelu"), "dropout": float,
    "attn_dropout": float, "tie_embeddings": bool, "parameter_free_attention": bool,
    "attention_only": bool,  # blocks without the feed-forward (and its norm)
    "no_bias": bool,  # Linear(bias=False) in attention, feed-forward and head
    "init": ("torch", "gpt2"),  # how the weights were drawn; loading does not depend on it
    "init_std": float,  # the gpt2 scheme's standard deviation; nor on it
    "random_positions": int,  # P: evaluation positions spread over [0, P) (models/positions.h)
    "layout": ("special", "bare"),  # the decoder's: [bos] input [sep] answer [eos], or input answer
}


def checkpoint_path(path, step=0):
    """The model file of `path`: itself if a file, else the run's checkpoint of `step` (0: the latest)."""
    if os.path.isfile(path):
        return path
    files = sorted(f for f in glob.glob(os.path.join(path, "checkpoints", "step-*.safetensors"))
                   if not f.endswith(".optim.safetensors"))
    if not files:
        raise LoadError(f"'{path}' is neither a .safetensors file nor a run directory with checkpoints")
    if step <= 0:
        return files[-1]
    want = os.path.join(path, "checkpoints", f"step-{step:08d}.safetensors")
    if want not in files:
        raise LoadError(f"run '{path}' has no checkpoint of step {step}")
    return want


def read_checkpoint(path):
    """(tensors as float64 torch tensors, metadata) of an attnlab model file."""
    try:
        arrays, meta, _ = safetensors.read(path)
    except (AssertionError, ValueError, KeyError, OSError) as e:
        raise LoadError(f"{path}: not a readable safetensors file of float32 tensors ({e})") from None
    if meta.get("kind", "model") != "model":
        raise LoadError(f"{path}: a checkpoint of kind '{meta.get('kind')}', not a model")
    return {k: torch.from_numpy(a.copy()).double() for k, a in arrays.items()}, meta


def config_from_metadata(meta, path):
    if "model_config" not in meta:
        raise LoadError(f"{path}: no model_config metadata (not written by attnlab train)")
    try:
        cfg = json.loads(meta["model_config"])
    except ValueError as e:
        raise LoadError(f"{path}: its model_config metadata is not JSON ({e})") from None
    if not isinstance(cfg, dict):
        raise LoadError(f"{path}: its model_config metadata is not a JSON object")
    for key, value in cfg.items():
        kind = CONFIG_FIELDS.get(key)
        if kind is None:
            raise LoadError(f"{path}: model_config field '{key}' is unknown to attnlab_torch")
        if isinstance(kind, tuple):
            if value not in kind:
                raise LoadError(f"{path}: model_config {key} = {value!r} is not one of {', '.join(kind)}")
        elif kind is float:
            if not isinstance(value, (int, float)):
                raise LoadError(f"{path}: model_config {key} = {value!r} is not a number")
        elif not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise LoadError(f"{path}: model_config {key} = {value!r} is not of type {kind.__name__}")
    cfg.setdefault("init", "torch")  # checkpoints written before --init existed
    cfg.setdefault("random_positions", 0)  # and before --random-positions
    cfg.setdefault("layout", "special")  # and before --layout
    cfg.setdefault("attention_only", False)  # and before --attention-only
    cfg.setdefault("no_bias", False)  # and before --no-bias
    cfg.setdefault("init_std", 0.02)  # and before --init-std
    rp = cfg["random_positions"]
    if isinstance(rp, int) and not isinstance(rp, bool) and rp != 0 and (rp < 0 or rp != cfg.get("max_len")):
        raise LoadError(f"{path}: model_config random_positions = {rp} is not 0 or max_len ({cfg.get('max_len')})")
    missing = sorted(set(CONFIG_FIELDS) - set(cfg))
    if missing:
        raise LoadError(f"{path}: model_config lacks {', '.join(missing)}")
    cfg["attn_scale"] = str(cfg["attn_scale"])
    try:
        scale = ref.attention_scale(cfg["attn_scale"], 1)
    except ValueError:
        scale = float("nan")
    if not (scale > 0 and math.isfinite(scale)):
        raise LoadError(f"{path}: model_config attn_scale = {cfg['attn_scale']!r} is not sqrt, none, linear "
                        "or a positive number")
    return cfg


# ---- the module ------------------------------------------------------------------

def float32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


class ParameterFreeAttention(ref.MultiHeadAttention):
    """attnlab's projections = false: one head over the whole width, the output the
    weighted average of the (unrotated) memory rows. The reference's forward with
    identity projections is exactly that."""

    def __init__(self, cfg, rope):
        nn.Module.__init__(self)
        self.h = 1
        self.d_k = self.d_v = cfg["d_model"]
        self.scale = ref.attention_scale(cfg["attn_scale"], self.d_k)
        self.rope = rope
        self.q_proj = self.k_proj = self.v_proj = self.out_proj = nn.Identity()


# ---- positions (models/positions.h) -------------------------------------------------

def spread_positions(n, p):
    """Position i of n: floor(i * p / n)."""
    return [i * p // n for i in range(n)]


def decoding_positions(cfg, prompt, answer):
    """models/positions.h decoding_positions: the positions of a decoding that reads `prompt`
    tokens and then at most `answer` answer tokens."""
    n = min(max(0, prompt) + max(0, answer), cfg["max_len"])
    return spread_positions(n, cfg["random_positions"]) if cfg["random_positions"] > 0 else list(range(n))


class Model(ref.Model):
    """The reference model, reading explicit position ids ("src_pos", "tgt_pos": (B, T) lists or
    tensors) when given; else 0..T-1, or with random positions each row's real length spread
    over [0, P) (attnlab's forward in evaluation)."""

    def forward(self, inp):
        keys = {"encoder": ["src"], "decoder": ["tgt_in"], "seq2seq": ["src", "tgt_in"]}[self.cfg["arch"]]
        self._positions = [self._ids_of(inp, key) for key in keys]
        try:
            return super().forward(inp)
        finally:
            self._positions = None

    def _ids_of(self, inp, key):
        pos_key = "src_pos" if key == "src" else "tgt_pos"
        if inp.get(pos_key) is not None:
            return torch.as_tensor(inp[pos_key], dtype=torch.long)
        ids = inp[key]
        b, t = ids.shape
        p = self.cfg["random_positions"]
        if p == 0:
            return None
        pad = inp.get(key + "_pad" if key == "src" else "tgt_pad")
        rows = []
        for i in range(b):
            n = t if pad is None else int((torch.as_tensor(pad)[i] == 0).sum())
            real = spread_positions(n, p)
            rows.append(real + [real[-1] if real else 0] * (t - n))
        return torch.tensor(rows, dtype=torch.long)

    def embed(self, ids, positions=None):
        if positions is None and getattr(self, "_positions", None):
            positions = self._positions.pop(0)
        return super().embed(ids, positions)


def build(cfg):
    model = Model(cfg)
    if cfg["parameter_free_attention"]:
        for block in model.modules():
            for name in ("attn", "self_attn", "cross_attn"):
                if isinstance(getattr(block, name, None), ref.MultiHeadAttention):
                    setattr(block, name, ParameterFreeAttention(cfg, getattr(block, name).rope))
    for m in model.modules():
        if isinstance(m, ref.MultiHeadAttention):
            m.scale = float32(m.scale)  # attnlab keeps the scale as a float32
    return model.double().eval()


def load_weights(model, tensors, path):
    own = dict(model.named_parameters())
    missing = sorted(set(own) - set(tensors))
    unknown = sorted(set(tensors) - set(own))
    if missing or unknown:
        raise LoadError(f"{path}: parameters differ from the model its config describes: "
                        f"missing {missing or 'none'}, unknown {unknown or 'none'}")
    with torch.no_grad():
        for name, p in own.items():
            if tuple(tensors[name].shape) != tuple(p.shape):
                raise LoadError(f"{path}: {name} has shape {list(tensors[name].shape)}, the config gives {list(p.shape)}")
            p.copy_(tensors[name])


def load(path, step=0):
    """The attnlab model of a run directory (checkpoint `step`, 0: the latest) or a model file, in eval mode.

    Call it with a dict of LongTensors as attnlab's format_batch lays them out: encoder
    {"src", "src_pad"}, decoder {"tgt_in", "tgt_pad"}, seq2seq all four (pads: 1 = padding,
    may be None). `model.attnlab_config` holds the model_config; `model.attnlab_path` the file.
    """
    file = checkpoint_path(path, step)
    tensors, meta = read_checkpoint(file)
    cfg = config_from_metadata(meta, file)
    model = build(cfg)
    load_weights(model, tensors, file)
    model.attnlab_config = cfg
    model.attnlab_path = file
    model.attnlab_metadata = meta
    return model


# ---- greedy decoding (models/*.cpp greedy) ----------------------------------------

def logits_of(model, **inputs):
    """The model's logits for inputs given as lists (None: absent)."""
    with torch.no_grad():
        return model({k: (torch.tensor(v, dtype=torch.long) if v is not None else None) for k, v in inputs.items()})


def is_bare(cfg):
    """Whether the model is a decoder with --layout bare: input then answer, no special tokens, no <eos>."""
    return cfg["arch"] == "decoder" and cfg["layout"] == "bare"


def decoding_prompt(cfg, source):
    """What a decoding reads before its answer (models/decoder_lm.cpp decoding_prompts): the decoder's
    [bos] source [sep] (bare: the source alone), seq2seq's decoder [bos]; the encoder reads the source."""
    if cfg["arch"] == "decoder":
        return list(source) if is_bare(cfg) else [BOS] + list(source) + [SEP]
    return [BOS] if cfg["arch"] == "seq2seq" else list(source)


def greedy(model, source, budget=None):
    """The greedy answer (ids) for one source sequence, as attnlab's SequenceModel::greedy with
    max_new_tokens = budget (default: max_len), at the positions decoding_positions gives."""
    cfg = model.attnlab_config
    arch, max_len = cfg["arch"], cfg["max_len"]
    budget = max_len if budget is None else budget
    needed = len(decoding_prompt(cfg, source)) if arch == "decoder" else len(source)
    if needed > max_len:
        read_as = f" and reads it as [bos] input [sep], {needed} positions" if needed > len(source) else ""
        raise LoadError(f"the input has {len(source)} tokens; this model takes sequences of at most {max_len} "
                        f"positions{read_as}")
    if arch == "encoder":
        return logits_of(model, src=[source], src_pad=None)[0].argmax(-1).tolist()
    out, seq = [], decoding_prompt(cfg, source)
    encoded = {} if arch == "decoder" else {"src": [source], "src_pad": None}
    table = decoding_positions(cfg, len(seq), budget - 1)
    while len(out) < budget:
        token = int(logits_of(model, tgt_in=[seq], tgt_pad=None, tgt_pos=[table[:len(seq)]], **encoded)[0, -1].argmax())
        if token == EOS and not is_bare(cfg):  # bare answers have no <eos>: any token is an answer token
            break
        out.append(token)
        seq.append(token)
        if len(seq) > max_len:  # the next step would read more positions than the model has
            break
    return out


def teacher_forced_batch(cfg, source, answer, budget):
    """training/evaluate.cpp teacher_forced_batch: the pass over the answer that reads what the
    decoding read (less a last token cut by the table or the budget), at its positions."""
    target = list(answer)
    if is_bare(cfg):  # input answer[:-1] read, the answer predicted from the input's last token on
        batch = {"targets": [[ref.IGNORE] * (len(source) - 1) + target]}
        batch["tgt_in"], batch["tgt_pad"] = ref.pad_rows([list(source) + target[:-1]], PAD)
        table = decoding_positions(cfg, len(source), budget - 1)
        batch["tgt_pos"] = [[table[min(i, len(table) - 1)] for i in range(len(batch["tgt_in"][0]))]]
        return batch
    if cfg["arch"] == "encoder":
        target = (target + [source[0]] * len(source))[:len(source)]
    else:
        filled = (len(source) + len(answer) >= cfg["max_len"] - 1 if cfg["arch"] == "decoder"
                  else len(answer) >= cfg["max_len"])
        if (filled or len(answer) >= budget) and target:
            target.pop()
    batch = ref.format_batch(cfg["arch"], [(source, target)])
    if cfg["arch"] != "encoder":
        table = decoding_positions(cfg, len(decoding_prompt(cfg, source)) if cfg["arch"] == "decoder" else 1, budget - 1)
        t = len(batch["tgt_in"][0])
        batch["tgt_pos"] = [[table[min(i, len(table) - 1)] for i in range(t)]]
    return batch


# ---- tasks (datasets/vocab.h) ------------------------------------------------------

def read_config_ini(run):
    path = os.path.join(run, "config.ini")
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise LoadError(f"cannot read {path}: {e.strerror} (--predict needs a run directory)") from None
    out = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


class TaskText:
    """Text <-> ids: the checkpoint's vocabulary, or for an older file the generated tasks' numbered symbols or
    add's characters."""

    NUMBERED = ("copy", "reverse", "sort", "duplicate", "induction", "recall")
    WRITTEN = ("words", "chars", "chars_ignoring_whitespace")

    def __init__(self, ini, arch, meta=None):
        meta = meta or {}
        self.name = ini.get("task", "")
        self.ini = ini
        self.written = None
        if "vocabulary" in meta:
            self.from_metadata(meta, arch)
        elif self.name == "add":
            self.symbols = list("0123456789+")
        elif self.name in self.NUMBERED:
            self.symbols = [str(i) for i in range(int(ini["vocab"]))]
        else:
            raise LoadError(f"task '{self.name}' is not supported by attnlab_torch --predict "
                            "(its symbols are in vocab.txt); load() still gives the model")
        if arch == "encoder" and self.name not in ("copy", "reverse", "sort", "duplicate", "add"):
            raise LoadError(f"an encoder run of task '{self.name}' is not supported by attnlab_torch --predict")
        if self.written is None:
            self.char_level = self.name == "add"
            self.tokens = SPECIALS + self.symbols
        self.ids = {t: i for i, t in enumerate(self.tokens)}

    def from_metadata(self, meta, arch):
        try:
            vocab, task = json.loads(meta["vocabulary"]), json.loads(meta.get("task", "{}"))
            self.tokens, self.written = list(vocab["tokens"]), vocab["written"]
            self.name = task.get("name", self.name)
        except (ValueError, KeyError, TypeError) as e:
            raise LoadError(f"the checkpoint's vocabulary metadata is malformed ({e})") from None
        if self.tokens[:len(SPECIALS)] != SPECIALS or self.written not in self.WRITTEN:
            raise LoadError(f"the checkpoint's vocabulary (written '{self.written}') is unknown to attnlab_torch")
        if self.name == "text":
            raise LoadError("a text run is a language model: attnlab predict refuses it too (use attnlab sample)")
        if arch == "encoder" and self.name == "pairs":
            raise LoadError("an encoder run of task 'pairs' is not supported by attnlab_torch --predict "
                            "(its answer length comes from the pairs file)")
        self.symbols = self.tokens[len(SPECIALS):]
        self.char_level = self.written != "words"

    def from_text(self, text):
        if self.written == "words" and self.name == "pairs":  # datasets/token_table.h: split on whitespace
            return [self.id_of(token) for token in text.split()]
        if self.written == "chars":  # every character a token, spaces included
            return [self.id_of(token) for token in text]
        pattern = r"<[^>]*>?|\S" if self.char_level else r"<[^>]*>?|[^\s<]+"
        ids = []
        for token in re.findall(pattern, text):
            if token not in self.ids:
                known = f'one of "{"".join(self.symbols)}"' if self.char_level else f"0..{len(self.symbols) - 1}"
                raise LoadError(f"unknown symbol '{token}' (known: {known} and <pad> <bos> <eos> <sep>)")
            ids.append(self.ids[token])
        return ids

    def id_of(self, token):
        if token not in self.ids:
            raise LoadError(f"unknown token '{token}' (not in the run's vocabulary)")
        return self.ids[token]

    def to_text(self, ids):
        return ("" if self.char_level else " ").join(self.tokens[i] for i in ids)

    def fixed_answer(self):
        """The length of every answer of a task whose answers have one length (induction: its span), else None."""
        return {"induction": int(self.ini.get("span", 3)), "recall": 2, "modular": 1}.get(self.name)

    def answer_length(self, source):
        """The correct answer's length (the encoder's answer is cut to it), as the task's solve;
        LoadError for an input the task cannot answer."""
        fixed = self.fixed_answer()
        if fixed is not None:
            return fixed
        if self.name == "duplicate":
            return 2 * len(source)
        if self.name == "add":
            plus = self.ids["+"]
            if source.count(plus) != 1 or source[0] == plus or source[-1] == plus:
                raise LoadError(f"add: the input '{self.to_text(source)}' must be digits, one '+', digits")
            i = source.index(plus)
            return max(i, len(source) - i - 1) + 1
        if self.name == "pairs":
            lengths = self.pair_lengths()
            if tuple(source) not in lengths:
                raise LoadError(f"pairs: the input '{self.to_text(source)}' is not in the pairs files")
            return lengths[tuple(source)]
        return len(source)

    def longest_answer(self):
        """The task's max_output_len: the longest answer of training."""
        fixed = self.fixed_answer()
        if fixed is not None:
            return fixed
        if self.name == "add":
            return int(self.ini.get("digits", 3)) + 1
        if self.name == "duplicate":
            return 2 * int(self.ini.get("max-len", 8))
        if self.name == "pairs":
            return max(self.pair_lengths().values())
        return int(self.ini.get("max-len", 8))

    def pair_lengths(self):
        """{input ids: answer length} of a pairs run's files (config.ini's file and heldout-file)."""
        if getattr(self, "_pairs", None) is None:
            self._pairs = {}
            for key in ("file", "heldout-file"):
                path = self.ini.get(key, "")
                if not path:
                    continue
                try:
                    with open(path, encoding="utf-8") as f:
                        lines = f.read().lstrip("\ufeff").splitlines()
                except (OSError, UnicodeDecodeError) as e:
                    raise LoadError(f"cannot read {path} ({e}): the expected answers' lengths, which plan "
                                    "attnlab's decoding, come from it") from None
                for line in lines:
                    if "\t" in line and line.strip():
                        src, out = line.split("\t", 1)
                        self._pairs.setdefault(tuple(self.from_text(src)), len(self.from_text(out)))
        return self._pairs

    def decoding_budget(self, source):
        """training/evaluate.cpp decoding_budget: the expected answer and one more token (--layout bare,
        which has no <eos> to decode: the expected answer), or for an input the task cannot answer the
        longest answer of training (and one more)."""
        eos = 0 if self.ini.get("layout", "special") == "bare" else 1
        try:
            return self.answer_length(source) + eos
        except LoadError:
            return self.longest_answer() + eos


def predict(run, text, step=0):
    """The line `attnlab predict --run RUN TEXT` prints first."""
    model = load(run, step)
    cfg = model.attnlab_config
    task = TaskText(read_config_ini(run), cfg["arch"], model.attnlab_metadata)
    source = task.from_text(text)
    if not source:
        raise LoadError("the input sequence is empty")
    for i in source:
        if i < len(SPECIALS):
            raise LoadError(f"the input holds the special token {task.tokens[i]}; write only the task's symbols")
    budget = task.decoding_budget(source)
    answer = greedy(model, source, budget)
    filled = (len(source) + len(answer) > cfg["max_len"] if is_bare(cfg)
              else len(source) + len(answer) >= cfg["max_len"] - 1 if cfg["arch"] == "decoder"
              else cfg["arch"] == "seq2seq" and len(answer) >= cfg["max_len"])
    if filled:  # as attnlab predict says it (training/evaluate.cpp answer_filled_table)
        end = "its expected length" if is_bare(cfg) else "<eos>"  # a bare answer has no <eos>
        print(f"note: the answer reached the end of the model's positional table ({cfg['max_len']} positions, "
              f"--positions when it was trained) before {end}; it may be cut short", file=sys.stderr)
    elif cfg["arch"] != "encoder" and not is_bare(cfg) and len(answer) >= budget:
        print(f"note: no <eos> after {budget - 1} answer tokens (the expected answer's length, or the longest "
              "trained one); decoding stops one token past it, as eval's does", file=sys.stderr)
    if cfg["arch"] == "encoder":
        answer = answer[:task.answer_length(source)]
    return task.to_text(answer)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="a run directory (or, without --predict, a .safetensors model file)")
    ap.add_argument("--predict", metavar="INPUT", help="print the greedy answer for INPUT, as attnlab predict")
    ap.add_argument("--step", type=int, default=0, help="the checkpoint of this step (default: the latest)")
    args = ap.parse_args()
    try:
        if args.predict is not None:
            print(predict(args.run, args.predict, args.step))
        else:
            model = load(args.run, args.step)
            n = sum(p.numel() for p in model.parameters())
            print(f"{model.attnlab_path}: {model.attnlab_config['arch']}, {n} parameters, "
                  f"config {json.dumps(model.attnlab_config, sort_keys=True)}")
    except LoadError as e:
        print(f"attnlab_torch: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
