"""Development script (not part of mmctx): zero-shot perplexity ranking on a fresh pool.

Each option is rendered as the reply (text style, as `mmctx run`'s ppl scorer asks); the option
with the lowest mean per-token loss wins. Its own loop, not the HF backend's `score`: the
backend computes image tokens from pixels, and oracle tokens have none. Image tokens are either ``exact`` or ``positions``
(`oracle_tokens.py`, as ``oracle_stage2.py`` trains on) or ``tower`` (the model's own vision tower and connector;
``tower+exact-ends`` with the arrow-end features made exact). On the
shipped model, tower mode gives what its card gives (action 0.59, commonsense 0.41 on 150 a task).

    python docs/experiments/oracle_rank.py MODEL_DIR exact|positions|tower PER_TASK SEED task,task,...
"""

import collections
import sys
import tempfile
from pathlib import Path

import torch

from mmctx.data.shapes.pool import generate_pool
from mmctx.models.spans import answer_turn, chat_conversation
from mmctx.prompts.build import build_prompt, shown_options
from mmctx.reference import vlm as V

sys.path.insert(0, str(Path(__file__).parent))
from oracle_tokens import exact_features, oracle_token  # noqa: E402

folder, mode, per, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
tasks = sys.argv[5].split(",")
root = Path(tempfile.mkdtemp()) / f"pool{seed}_{per}"
pool = generate_pool(root, per, seed, tasks)
model, processor, adapter = V.load_for_training(folder)
model.eval()
arch = V.Architecture()
r = V.Renderer(processor, adapter, root)
basis = V.feature_basis(arch.hidden, 0)
scale = V.token_scale(V._patches(model))
paths = V._image_paths(r, pool)
if mode.startswith("tower"):
    ps, px = V._pixels(r, pool)
    toks = V.cached_image_tokens(model, ps, px)
    if mode == "tower+exact-ends":
        toks = V.with_exact_arrow_ends(toks, {p: exact_features(s.meta) for p, s in zip(ps, pool)}, basis, scale)
else:
    toks = {p: oracle_token(s.meta, basis, scale, mode) for p, s in zip(paths, pool)}
acc = collections.defaultdict(list)
with torch.no_grad():
    for s, _p in zip(pool, paths):
        built = build_prompt(s, [], r.preset, "text", 0, root)
        conv, parts = chat_conversation(built.messages)
        shown = shown_options(s, r.preset, 0)
        convs = [r.encode(conv + [answer_turn(t)], tuple(x.path for x in parts)) for t in shown.texts]
        ids, mask, weights, tokens = V.collate(convs, toks, processor.tokenizer.pad_token_id)
        o = V.forward_cached(model, ids, mask, tokens, r.image_id)
        logits = model.lm_head(o.last_hidden_state[:, :-1]).log_softmax(-1)
        nll = -(logits.gather(-1, ids[:, 1:, None])[..., 0] * weights[:, 1:]).sum(1) / weights[:, 1:].sum(1)
        right = int(nll.argmin()) == shown.gold
        kind = (s.meta.get("query") or {}).get("kind", "")
        acc[s.task].append(right)
        if s.task in ("commonsense", "temporal"):
            acc[f"{s.task}:{kind}"].append(right)
for k, v in sorted(acc.items()):
    m = sum(v) / len(v)
    se = (m * (1 - m) / len(v)) ** 0.5
    print(f"{folder[-30:]:30s} {mode:6s} {k:32s} n={len(v):4d} {m:.3f} ±{1.96 * se:.3f}", flush=True)
