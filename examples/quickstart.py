"""A tour of the DSL: build a lazy graph, compile it once, run it at two batch sizes.

Nothing is computed while the graph is built; ``lm.compile`` returns a callable over numpy arrays.
(Training: see examples/mnist/train.py.)
"""

import argparse

import numpy as np

import luminal as lm


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--backend", choices=lm.backend_names(), default="cpu", help="where the program runs")
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    g = lm.Graph()
    x = g.input("x", ("B", 16))                       # "B" is bound when the graph runs
    w1 = g.constant(rng.normal(0, 0.25, (16, 32)).astype(np.float32))
    w2 = g.constant(rng.normal(0, 0.25, (32, 4)).astype(np.float32))
    h = (x @ w1).gelu()
    logits = h @ w2
    probs = logits.softmax(-1)
    top = logits.argmax(-1)
    stats = lm.stack([h.mean(), h.std(), h.abs().max()])
    f = lm.compile([probs, top, stats], backend=args.backend)
    print(f"graph: {len(g.nodes)} primitive nodes; inputs {f.input_names}")
    for batch in (3, 5):
        p, t, s = f(x=rng.normal(size=(batch, 16)).astype(np.float32))
        print(f"B={batch}: probs {p.shape} (rows sum to {p.sum(-1).round(5)}), argmax {t}, "
              f"hidden mean/std/max {np.round(s, 4)}")


if __name__ == "__main__":
    main()
