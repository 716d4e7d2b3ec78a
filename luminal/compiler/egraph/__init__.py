"""The egglog stage of the compiler: frontend nodes -> an optimised Term DAG.

``optimize(roots, constants=None, budget=None, search=0, seed=0, timer=None, cost_model=CPU)``
lowers the graph into one shared e-graph (``lower.py``, ``schema.py``, folding constants on the way:
``fold.py``), runs the rulesets ``algebra``, ``matmul``, ``contraction`` and ``fusion`` (egglog
text: ``rules/*.egg``) under bounded schedules (``schedule.py``, ``budget.py``), extracts one
program with a DAG cost model (``egraph_read.py``, ``extract.py``, ``cost.py``) and, with
``search=N``, times neighbours of it (``search.py``).
``res.terms`` maps each root node id to its Term; ``res.stats`` explains the run (see ``optimize.py``).
"""

from luminal.compiler.egraph.budget import Budget
from luminal.compiler.egraph.cost import CPU, CostModel
from luminal.compiler.egraph.optimize import Result, optimize

__all__ = ["Budget", "CPU", "CostModel", "Result", "optimize"]
