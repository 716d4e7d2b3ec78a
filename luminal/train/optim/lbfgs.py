"""L-BFGS, as torch.optim.LBFGS: a host-driven optimizer over a compiled loss-and-gradient program.

torch's ``LBFGS.step(closure)`` evaluates the loss and gradient several times per step (once per
iteration, more in the line search), so the update cannot be one compiled train step. Here the
closure runs a compiled program (``LBFGS.loss_and_grads`` makes one) and returns the loss and the
gradients; the algorithm (two-loop recursion over the last ``history_size`` pairs, the step size,
torch's strong-Wolfe line search and its stopping tests) runs on the host in the parameters' dtype, as
torch's, and writes the parameters between evaluations."""

from __future__ import annotations

import numbers

import numpy as np

from luminal.compiler import compile as lm_compile
from luminal.core.errors import check_int, check_number
from luminal.train.autograd import grad
from luminal.train.optim.optimizer import Optimizer


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2, in ``bounds``
    (default: between x1 and x2): torch's ``_cubic_interpolate``."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square >= 0:
        d2 = np.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, lo), hi)
    return (lo + hi) / 2.0


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """torch's ``_strong_wolfe``: a step ``t`` along ``d`` satisfying the strong Wolfe conditions,
    bracketed then zoomed by cubic interpolation. Returns ``(f_new, g_new, t, evaluations)``."""
    d_norm = np.abs(d).max()
    g = g.copy()
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = g_new.dot(d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:  # bracket a step satisfying the conditions
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f, bracket_g, bracket_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new.copy()], \
                [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f, bracket_g, bracket_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new.copy()], \
                [gtd_prev, gtd_new]
            break
        min_step, max_step = t + 0.01 * (t - t_prev), t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
    if ls_iter == max_ls:  # reached the most evaluations
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:  # zoom into the bracket
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:  # too close to an end: move away from it
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                t = max(bracket) - eps if abs(t - max(bracket)) < abs(t - min(bracket)) else min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos], bracket_f[high_pos], bracket_g[high_pos], bracket_gtd[high_pos] = \
                t, f_new, g_new.copy(), gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos], bracket_f[high_pos], bracket_g[high_pos], bracket_gtd[high_pos] = \
                    bracket[low_pos], bracket_f[low_pos], bracket_g[low_pos], bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos], bracket_g[low_pos], bracket_gtd[low_pos] = \
                t, f_new, g_new.copy(), gtd_new
    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals


# torch's per-step state: arrays (flat, in the parameters' dtype) and numbers
_ARRAYS = ("d", "prev_flat_grad", "old_dirs", "old_stps", "ro")
_NUMBERS = ("func_evals", "n_iter", "t", "H_diag", "prev_loss")


class LBFGS(Optimizer):
    """torch.optim.LBFGS, driven from the host: ``step(closure)`` where ``closure()`` returns ``(loss,
    grads)``, the loss as a number and the gradients of the optimizer's parameters in their order (the
    outputs of a compiled program: ``loss_and_grads(loss)`` compiles one). The parameters are written
    between evaluations, so the closure's program reads the new values at each call::

        f = opt.loss_and_grads(loss)          # loss: a scalar graph tensor of the parameters
        for _ in range(n):
            opt.step(lambda: f(x=X, y=Y))     # or opt.step(f) when the loss has no inputs

    As torch's: one param group, all parameters of one dtype (the flat vectors' arithmetic is in it),
    ``max_eval`` default ``max_iter * 5 // 4``, ``line_search_fn`` None (steps of ``lr``) or
    ``"strong_wolfe"``. The state (torch's ``d``, ``t``, ``old_dirs``, ``old_stps``, ``ro``,
    ``H_diag``, ``prev_flat_grad``, ``prev_loss``, ``func_evals``, ``n_iter``) is in ``state_dict()``;
    torch's ``al`` is scratch space of the two-loop recursion, written before it is read, and is not
    kept. ``train.compile_step`` cannot run it (its update re-evaluates the loss) and says so.
    """

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if max_eval is None:
            max_eval = check_int("LBFGS", "max_iter", max_iter, minimum=1) * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                        tolerance_change=tolerance_change, history_size=history_size, line_search_fn=line_search_fn)
        self._validate(defaults)
        super().__init__(params, defaults)
        self._params = self.param_groups[0]["params"]
        kinds = {p.data.dtype for p in self._params}
        if len(kinds) > 1:
            raise TypeError(f"LBFGS: all parameters must have one dtype (its flat vectors hold them all), got "
                            f"{', '.join(p.describe() for p in self._params)}")
        self.lbfgs_state: dict = {}

    def _validate(self, h: dict) -> None:
        self._nonnegative(h, ("lr", "tolerance_grad", "tolerance_change"))
        for k in ("max_iter", "max_eval", "history_size"):
            check_int("LBFGS", k, h[k], minimum=1)
        if h["line_search_fn"] not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got {h['line_search_fn']!r}")

    def add_param_group(self, group: dict) -> None:
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups): it takes one list of "
                             "parameters")
        self._validate({**self.defaults, **group})
        super().add_param_group(group)

    # the compiled train step: not this optimizer's way ----------------------------------------------
    def scalars(self, group: dict, t: int) -> dict[str, float]:
        """No runtime scalars: the update runs on the host (``step``)."""
        return {}

    def update(self, p, g, state: dict, s: dict, group: dict):
        """Refused: L-BFGS evaluates the loss several times per step, which one compiled step cannot."""
        raise TypeError("LBFGS: its step evaluates the loss and gradients several times (each iteration, and the "
                        "line search), so it cannot be compiled into a train step: build the closure with "
                        "opt.loss_and_grads(loss) and call opt.step(closure)")

    # the host-driven step ---------------------------------------------------------------------------
    def loss_and_grads(self, loss, backend: str | None = None):
        """A closure for ``step``: ``loss`` (a float scalar graph tensor of the parameters) and its
        gradients with respect to them compiled into one program. Returns ``f(**inputs) -> (loss,
        grads)``, the inputs those of ``loss``'s graph.

        Args:
            loss: the scalar loss tensor.
            backend: the backend to compile for (``lm.compile``'s).
        """
        grads = grad(loss, self._params)
        fn = lm_compile([loss, *grads], **({} if backend is None else {"backend": backend}))

        def closure(**inputs):
            out = fn(**inputs)
            return float(np.asarray(out[0])), list(out[1:])

        return closure

    def _evaluate(self, closure) -> tuple[float, np.ndarray]:
        """The closure's loss and its gradients flattened into one vector (torch's
        ``_gather_flat_grad``), checked."""
        out = closure()
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError(f"LBFGS.step: the closure must return (loss, grads), the gradients of the optimizer's "
                            f"{len(self._params)} parameters in order (opt.loss_and_grads(loss) compiles one); got "
                            f"{type(out).__name__}")
        loss, grads = out
        grads = list(grads)
        if len(grads) != len(self._params):
            raise ValueError(f"LBFGS.step: the closure returned {len(grads)} gradients for {len(self._params)} "
                             f"parameters")
        flat = []
        for k, (p, g) in enumerate(zip(self._params, grads)):
            g = np.asarray(g)
            if g.shape != tuple(p.shape):
                raise ValueError(f"LBFGS.step: gradient {k} has shape {g.shape}, for {p.describe()}")
            flat.append(g.astype(self._dtype, copy=False).reshape(-1))
        if not isinstance(loss, numbers.Real) and not (isinstance(loss, np.ndarray) and loss.size == 1):
            raise TypeError(f"LBFGS.step: the closure's loss must be a number, got {type(loss).__name__}")
        return float(np.asarray(loss).reshape(())), np.concatenate(flat)

    @property
    def _dtype(self):
        return self._params[0].data.dtype

    def _flat_params(self) -> np.ndarray:
        return np.concatenate([np.asarray(p.data, self._dtype).reshape(-1) for p in self._params])

    def _set_flat(self, flat: np.ndarray) -> None:
        offset = 0
        for p in self._params:
            n = p.numel()
            p.set(flat[offset:offset + n].reshape(p.shape))
            offset += n

    def _add_grad(self, t, d: np.ndarray) -> None:
        """``p += t * d`` for the flat direction ``d`` (torch's ``_add_grad``, in the parameters' dtype)."""
        x = self._flat_params()
        self._set_flat(x + d * self._dtype.type(t))

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        loss, flat_grad = self._evaluate(closure)
        self._set_flat(x)
        return loss, flat_grad

    def step(self, closure):
        """One L-BFGS step (up to ``max_iter`` iterations): torch's ``LBFGS.step``. Returns the loss of
        the closure's first evaluation, before the step.

        Args:
            closure: a function of no arguments returning ``(loss, grads)`` (``loss_and_grads``).
        """
        if not callable(closure):
            raise TypeError(f"LBFGS.step: closure must be a function returning (loss, grads), got "
                            f"{type(closure).__name__}")
        group = self.param_groups[0]
        self._check_numbers(group)
        self._validate(group)
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        state = self.lbfgs_state
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        dtype = self._dtype.type

        orig_loss, flat_grad = self._evaluate(closure)
        loss = orig_loss
        current_evals = 1
        state["func_evals"] += 1
        self.steps += 1
        if np.abs(flat_grad).max() <= tolerance_grad:  # optimal already
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag, prev_flat_grad, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:  # the direction: steepest descent first, then the two-loop recursion
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * dtype(t)
                ys = y.dot(s)
                if ys > 1e-10:  # the curvature pair is kept only where it is positive
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(dtype(1.0) / ys)
                    H_diag = ys / y.dot(y)
                num_old = len(old_dirs)
                al = [None] * num_old
                q = -flat_grad
                for i in range(num_old - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q = q - old_dirs[i] * al[i]
                r = q * dtype(H_diag)
                for i in range(num_old):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r = r + old_stps[i] * (al[i] - be_i)
                d = r
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            # the step size: scaled by the gradient's size at the very first iteration
            t = min(1.0, dtype(1.0) / np.abs(flat_grad).sum()) * lr if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d)
            if gtd > -tolerance_change:  # not a descent direction
                break
            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = self._flat_params()

                def obj_func(x, t, d):
                    return self._directional_evaluate(closure, x, t, d)

                loss, flat_grad, t, ls_func_evals = _strong_wolfe(obj_func, x_init, t, d, loss, flat_grad, gtd,
                                                                  max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = np.abs(flat_grad).max() <= tolerance_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:  # re-evaluate, but not after the last iteration (torch's)
                    loss, flat_grad = self._evaluate(closure)
                    opt_cond = np.abs(flat_grad).max() <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if np.abs(d * dtype(t)).max() <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss

    # state ----------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """``Optimizer.state_dict`` with torch's L-BFGS state: the arrays ``state.0.<name>`` (``old_dirs``
        and ``old_stps`` stacked, one row per kept pair) and the numbers under ``"lbfgs"``."""
        sd = super().state_dict()
        st = self.lbfgs_state
        n = sum(p.numel() for p in self._params)
        for k in _ARRAYS:
            if k in st:
                v = st[k]
                if k in ("old_dirs", "old_stps"):
                    v = np.stack(v) if v else np.zeros((0, n), self._dtype)
                sd["arrays"][f"state.0.{k}"] = np.asarray(v, self._dtype)
        sd["lbfgs"] = {k: float(st[k]) if k not in ("func_evals", "n_iter") else int(st[k])
                       for k in _NUMBERS if k in st and st[k] is not None}
        return sd

    def prepare_load(self, sd: dict):
        """``Optimizer.prepare_load`` and the L-BFGS state (``state_dict``'s), checked before any of it
        loads."""
        name = "LBFGS.load_state_dict"
        self._check_format(name, sd)
        arrays = dict(sd["arrays"])
        own = {k[len("state.0."):]: arrays.pop(k) for k in list(arrays) if k.startswith("state.0.")
               and k[len("state.0."):] in _ARRAYS}
        apply = super().prepare_load({**sd, "arrays": arrays})
        numbers_ = sd.get("lbfgs", {})
        if not isinstance(numbers_, dict) or any(k not in _NUMBERS for k in numbers_):
            raise ValueError(f"{name}: 'lbfgs' must be a dict with keys among {list(_NUMBERS)}, got {numbers_!r}")
        n = sum(p.numel() for p in self._params)
        state = {}
        for k, v in own.items():
            v = np.asarray(v)
            want = {"ro": (None,), "old_dirs": (None, n), "old_stps": (None, n)}.get(k, (n,))
            if v.ndim != len(want) or any(w is not None and w != s for w, s in zip(want, v.shape)):
                raise ValueError(f"{name}: state.0.{k} has shape {v.shape}; expected "
                                 f"{tuple('k' if w is None else w for w in want)} for {n} parameter elements")
            v = v.astype(self._dtype)
            state[k] = list(v) if k in ("old_dirs", "old_stps", "ro") else v
        if state and len({len(state.get(k, ())) for k in ("old_dirs", "old_stps", "ro")}) != 1:
            raise ValueError(f"{name}: old_dirs, old_stps and ro must hold as many entries")
        for k, v in numbers_.items():
            check_number(name, k, v)
        state.update(numbers_)

        def run():
            apply()
            self.lbfgs_state = state

        return run
