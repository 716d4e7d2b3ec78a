"""Loop rolling: optimise one copy of a repeated block, then call the result once per repetition.

Models repeat blocks (MLP layers, transformer layers) in the forward and in the backward pass. The
e-graph should see each block once, so that its share of compile time stays flat as depth grows:

1. **Detect** (``detect.py``): a body's trips are windows of a periodic sequence of the graph's nodes in
   creation order, found with array passes over per-node columns (a body's ``Span``). Trip t is the
   t-th window; a position (an offset in the window) names one node per trip.
2. **Template** (``template.py``): trip 0, every input that is not read from inside its trip read
   from a synthetic Input leaf instead (leaves shared by all trips stay, so constants still fold, as
   do small constant computations every trip reads). Its outputs are the positions read outside
   their trip. It is optimised once.
3. **Rest** (``template.py``): everything outside the loops, trip outputs read from synthetic
   leaves; optimised once.
4. **Link** (``link.py``): the optimised template becomes a Body (``body.py``); the rest's terms
   and, for every trip, Call terms of that body on the trip's actual inputs make one Term DAG. The
   outputs that only later trips read (neither the rest, the roots, nor a call returning its argument
   as it is) are packed: a trip then costs the later stages one Out and one buffer for all of them.
5. **Calls** (``calls.py``): the kernel stage builds a body's kernels once (a ``kernel_graph.Body``) and makes
   each Call one ``call`` kernel of it.

Every trip is isomorphic to trip 0 with its own inputs, so the linked DAG computes exactly what the
roots compute. The price: neither the e-graph nor the kernel stage fuses across a body's boundary
(a body's inputs and outputs are buffers). Detection is array passes over the graph; the template,
the rest and linking cost the body, the rest and the trips' interfaces, never the trips' bodies.
``roll.py`` runs the stages (``optimize_rolled``).
"""

from luminal.compiler.rolling.detect import Loops
from luminal.compiler.rolling.roll import optimize_rolled

__all__ = ["Loops", "optimize_rolled"]
