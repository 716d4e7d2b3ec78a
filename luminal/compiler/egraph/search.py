"""``search=N``: time up to N random neighbours of the cost model's choice on the target and keep
the fastest. A neighbour switches one to three e-classes (among those the program uses that have
another acyclic e-node) to another e-node; the random stream comes from ``seed`` alone, so a given
seed tries the same candidates."""

from __future__ import annotations

import random

from luminal.compiler.egraph.extract import find_cycle, reachable


def neighbours(g, base: dict, roots, n: int, seed: int):
    """Up to ``n`` distinct acyclic choices near ``base`` (dicts class -> ENode)."""
    rng = random.Random(seed)
    seen = {_sig(base, roots)}
    used = [c for c in reachable(base, roots) if len(g.classes[c]) > 1]
    out = []
    for _ in range(n * 20 if used else 0):
        if len(out) >= n:
            break
        cand = dict(base)
        for c in rng.sample(used, min(len(used), rng.randint(1, 3))):
            alts = [e for e in g.classes[c] if e is not base[c] and c not in e.kids and all(k in cand for k in e.kids)]
            if alts:
                cand[c] = rng.choice(alts)
        sig = _sig(cand, roots)
        if sig in seen or find_cycle(cand, roots) is not None:
            continue
        seen.add(sig)
        out.append(cand)
    return out


def _sig(choice, roots):
    return tuple(choice[c].key() for c in reachable(choice, roots))
