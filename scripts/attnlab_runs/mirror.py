"""attnlab's rules that the PyTorch references (scripts/pytorch/, scripts/studies/torch_gpt_reference.py)
follow, written once."""


def no_decay(name):
    """attnlab's default weight-decay exclusions (framework/optim/optimizer.h): biases, layer norms
    (ln, ln1, ln_f ...) and embeddings."""
    parts = name.split(".")
    if parts[-1] == "bias":
        return True
    for s in parts:
        is_ln = s.startswith("ln") and (len(s) == 2 or s[2] == "_" or s[2:].isdigit())
        if is_ln or "emb" in s:
            return True
    return False
