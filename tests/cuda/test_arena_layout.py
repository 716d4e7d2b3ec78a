"""A binding's device arena is laid out by the compiler's memory plan: every temp at the start of its
slot, the slots one after another (256-byte aligned), the inputs together after them (one upload),
and nothing overlapping that the plan keeps apart."""

import numpy as np
from programs import compiled, mlp_softmax, rolled_layers

from luminal.backends.cuda import runtime as rt
from luminal.backends.cuda.arena import aligned, buffer_bytes


def _binding(builder):
    f, inputs = compiled(builder)
    f(**inputs)
    program = f.runner.program
    (binding,) = program._bindings.values()
    return program, binding


def test_temps_sit_in_their_memory_plan_slots():
    for builder in (mlp_softmax, rolled_layers):
        program, binding = _binding(builder)
        plan, lay, env = program.plan, binding.layout, binding.env
        starts = np.cumsum([0] + [aligned(n) for n in plan.slot_bytes(env)])
        assert lay.regions["temps"] == (0, int(starts[-1]))
        for slot, bufs in enumerate(plan.slots):
            for b in bufs:
                assert lay.offset[b.id] == starts[slot], (builder.__name__, b)
                assert buffer_bytes(b, env) <= starts[slot + 1] - starts[slot]
        assert len(plan.slots) > 1


def test_inputs_are_one_region_and_the_arena_is_one_allocation():
    program, binding = _binding(mlp_softmax)
    lay, env = binding.layout, binding.env
    lo, hi = lay.regions["inputs"]
    spans = sorted((lay.offset[b.id], lay.offset[b.id] + buffer_bytes(b, env))
                   for b in program.kg.buffers if b.kind == "input")
    assert spans and spans[0][0] == lo and spans[-1][1] <= hi
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert len(binding.in_staging) == hi - lo  # one pinned buffer, the region's layout
    regions = sorted(lay.regions.values())
    assert regions[0][0] == 0 and regions[-1][1] == lay.size
    assert all(a[1] == b[0] for a, b in zip(regions, regions[1:]))  # back to back
    assert len(rt.simulated().device.bytes_at(binding.base, lay.size)) == lay.size
