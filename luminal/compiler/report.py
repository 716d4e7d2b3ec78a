"""``compiled.report()``: what the compiler did, so every compile can explain itself."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Report:
    nodes_before: int
    nodes_after: int
    egraph: dict  # {"enodes": n, "eclasses": n, "choices": classes with more than one usable e-node}
    rules: dict  # rule name -> times fired
    kernels: list  # [(kind, fused primitive names)]
    loops: list  # [{"body_nodes": n, "trips": n}]
    budget_hit: str | None
    times: dict  # stage -> seconds
    memory: dict = field(default_factory=dict)  # {"peak_bytes", "no_reuse_bytes", "binding"}
    # {"hit": True, "key", "compile_s", "compile_times"} when the result came from the compile cache
    # (``compiler/cache.py``): the stored statistics above, ``times`` this load's, ``compile_times`` the
    # stages of the compile that stored it
    cache: dict = field(default_factory=dict)
    # the backend's code generation so far (bindings laid out, at their first call or ``prepare``): for
    # the cpu backend ``{"bindings", "seconds", "calls", "kernels", "reused", "compiled", "cached"}``
    # (calls of generated code; kernels generated and reused; LLVM objects compiled and from a cache)
    codegen: dict = field(default_factory=dict)
    _plan: object = None
    _buffers: object = None

    @classmethod
    def from_stats(cls, stats: dict, kg, plan, times: dict) -> Report:
        r = cls(stats.get("nodes_before", 0), stats.get("nodes_after", 0), dict(stats.get("egraph", {})),
                dict(stats.get("rules", {})), _kernels(kg),
                list(stats.get("loops", [])), stats.get("budget_hit"), dict(times), _plan=plan)
        if not kg.dims:
            r.bind({})
        return r

    def bind(self, env: dict) -> None:
        """Fill in the memory numbers for one binding of the symbolic dims (the latest run's)."""
        if self._plan is None:
            return
        self.memory = {"peak_bytes": int(self._plan.peak_bytes(env)),
                       "no_reuse_bytes": int(self._plan.no_reuse_bytes(env)), "binding": dict(env)}

    def generated(self, codegen: dict) -> None:
        """Take the backend's code generation numbers (``codegen``) and its time as a stage of its own."""
        self.codegen = dict(codegen)
        self.times["code generation"] = codegen["seconds"]

    @property
    def kernels_by_kind(self) -> dict:
        return dict(Counter(k for k, _ in self.kernels))

    def __str__(self) -> str:
        eg = self.egraph
        lines = ["luminal compile report",
                 f"  nodes: {self.nodes_before} before -> {self.nodes_after} after",
                 f"  e-graph: {eg.get('enodes', '?')} e-nodes in {eg.get('eclasses', '?')} e-classes, "
                 f"{eg.get('choices', '?')} with a choice"]
        if self.cache.get("hit"):
            lines.append(f"  from the compile cache: entry {self.cache['key'][:16]} (stored by a compile of "
                         f"{self.cache['compile_s'] * 1e3:.1f} ms; egglog did not run)")
        if self.budget_hit:
            lines.append(f"  budget hit: {self.budget_hit}")
        fired = {k: v for k, v in self.rules.items() if v}
        lines.append(f"  rules fired: {sum(fired.values())}" + ("" if fired else " (none)"))
        lines += [f"    {n:<40} x{c}" for n, c in sorted(fired.items(), key=lambda kv: (-kv[1], kv[0]))]
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.kernels_by_kind.items()))
        lines.append(f"  kernels: {len(self.kernels)} ({kinds})")
        for i, (kind, fused) in enumerate(self.kernels):
            lines.append(f"    k{i:<4} {kind:<12} {' '.join(fused)}")
        if self.loops:
            rolled = ", ".join(f"{lp['body_nodes']} nodes x {lp['trips']} trips" for lp in self.loops)
            lines.append(f"  loops rolled: {rolled}")
        else:
            lines.append("  loops rolled: none")
        if self.memory:
            m = self.memory
            at = f" at {m['binding']}" if m["binding"] else ""
            lines.append(f"  memory: peak {_bytes(m['peak_bytes'])} with reuse, {_bytes(m['no_reuse_bytes'])} "
                         f"without{at}")
        else:
            lines.append("  memory: symbolic sizes; known after the first run")
        c = self.codegen
        if c.get("bindings"):
            lines.append(f"  code generation: {c['bindings']} binding(s) laid out in {c['seconds'] * 1e3:.1f} ms, "
                         f"{c['calls']} calls of generated code: {c['kernels']} kernels generated, {c['reused']} "
                         f"reused; LLVM objects: {c['compiled']} compiled, {c['cached']} from a cache")
        elif c:
            lines.append("  code generation: none yet (at the first call of each binding, or prepare())")
        lines.append("  time per stage: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in self.times.items()))
        return "\n".join(lines)


def _kernels(kg) -> list:
    """[(kind, fused)] of every kernel as the program runs: a call counts its body's kernels."""
    bodies = {id(r): [(k.kind, tuple(k.fused)) for k in r.kernels] for r in kg.bodies()}
    out: list = []
    for k in kg.kernels:
        if k.kind == "call":
            out += bodies[id(k.body)]
        else:
            out.append((k.kind, tuple(k.fused)))
    return out


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


__all__ = ["Report"]
