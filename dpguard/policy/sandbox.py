"""The sandbox that renders policy messages and plan templates within their budgets
(dpguard.policy.templates): Jinja's sandboxed environment, a code generator that makes the
compiled template report its work, and a template class that renders under one budget. A module
of its own, imported only when a template is rendered, so a process that renders none (the plain
messages: dpguard.policy.plain) never imports jinja2."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import wraps
from typing import Any

from jinja2 import Template, nodes
from jinja2.compiler import CodeGenerator, operators
from jinja2.runtime import markup_join, str_join
from jinja2.sandbox import SandboxedEnvironment, safe_range

from dpguard.policy.templates import (
    _ACTIVE,
    _COMPILING,
    MAX_DEPTH,
    Limits,
    _binop_size,
    _Budget,
    _call_name,
    _charge_call,
    _format_widths,
    _leaf_size,
    _refused,
    _size,
    _too_big,
)


class Metered(CodeGenerator):
    """Compiles templates that report their work: loop iterations, captured output, joins,
    comparisons and dict keys (hashing a tuple of shared tuples walks all of it)."""

    def buffer(self, frame: Any) -> None:  # {% set %} blocks, macros, filter blocks
        frame.buffer = self.temporary_identifier()
        self.writeline(f"{frame.buffer} = environment.metered_buffer()")

    def enter_frame(self, frame: Any) -> None:
        super().enter_frame(frame)
        if frame.loop_frame:  # entered at the top of a for loop's body
            self.writeline("environment.count_step('a loop iteration')")

    def visit_Concat(self, node: Any, frame: Any) -> None:
        markup = "False"
        if frame.eval_ctx.volatile:
            markup = "context.eval_ctx.volatile"
        elif frame.eval_ctx.autoescape:
            markup = "True"
        self.write("environment.joined((")
        for part in node.nodes:
            self.visit(part, frame)
            self.write(", ")
        self.write(f"), {markup})")

    def charged(self, node: Any, frame: Any) -> None:
        """An expression charged by its size when it runs (a constant is bounded by the
        template's own text)."""
        if isinstance(node, nodes.Const):
            self.visit(node, frame)
            return
        self.write("environment.charged(")
        self.visit(node, frame)
        self.write(")")

    def visit_Compare(self, node: Any, frame: Any) -> None:
        self.write("(")
        self.charged(node.expr, frame)
        for operand in node.ops:
            self.visit(operand, frame)
        self.write(")")

    def visit_Operand(self, node: Any, frame: Any) -> None:
        self.write(f" {operators[node.op]} ")
        self.charged(node.expr, frame)

    def visit_Dict(self, node: Any, frame: Any) -> None:
        self.write("{")
        for i, item in enumerate(node.items):
            self.write(", " if i else "")
            self.charged(item.key, frame)
            self.write(": ")
            self.visit(item.value, frame)
        self.write("}")


class BoundedTemplate(Template):
    def render(self, *args: Any, **kwargs: Any) -> str:
        budget = _Budget(self.environment.limits)  # type: ignore[attr-defined]  # a Bounded
        token = _ACTIVE.set(budget)
        try:
            context = self.new_context(dict(*args, **kwargs))
            return "".join(budget.write(self.root_render_func(context)))
        except Exception:
            self.environment.handle_exception()
            raise  # handle_exception raises; this line is for the type checker
        finally:
            _ACTIVE.reset(token)

    def generate(self, *args: Any, **kwargs: Any) -> Iterator[str]:
        yield self.render(*args, **kwargs)  # one budget for the whole text


class MeteredBuffer(list[str]):
    def __init__(self, budget: _Budget) -> None:
        super().__init__()
        self.budget = budget

    def append(self, item: str) -> None:
        self.budget.spend(_leaf_size(item), "captured output")
        super().append(item)

    def extend(self, items: Iterable[str]) -> None:
        parts = tuple(items)
        self.budget.spend(sum(map(_leaf_size, parts)), "captured output")
        super().extend(parts)


class Bounded(SandboxedEnvironment):
    code_generator_class = Metered
    template_class = BoundedTemplate
    intercepted_binops = frozenset(("+", "*", "%", "**"))

    def __init__(self, limits: Limits, **options: Any) -> None:
        super().__init__(finalize=self.charged, **options)
        self.limits = limits
        self.globals["range"] = self.range

    def budget(self) -> _Budget:
        """The rendering's budget; outside one, none: Jinja folds constant expressions while
        it compiles (`{{ 'a' | center(10**6) }}` a thousand times would be built then), and
        an operation refused there is left for the rendering, under its budget."""
        return _ACTIVE.get() or _Budget(_COMPILING)

    def count_step(self, what: str) -> None:
        self.budget().spend(1, what)

    def charged(self, value: Any) -> Any:
        budget = self.budget()
        budget.spend(_size(value, budget.left), "reading a value")
        return value

    def metered_buffer(self) -> MeteredBuffer:
        return MeteredBuffer(self.budget())

    def joined(self, parts: tuple[Any, ...], markup: bool) -> str:
        budget = self.budget()
        budget.reserve(sum(_size(p, budget.left) for p in parts), "joining with ~")
        return str(markup_join(parts) if markup else str_join(parts))

    def range(self, *args: int) -> range:
        numbers = safe_range(*args)
        self.budget().spend(len(numbers), f"a range of {len(numbers):,} numbers")
        return numbers

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        problem = _too_big(operator, left, right)
        if problem:
            raise _refused(problem)
        budget = self.budget()
        budget.reserve(_binop_size(operator, left, right, budget.left), f"{operator!r}")
        return super().call_binop(context, operator, left, right)

    def getitem(self, obj: Any, argument: Any) -> Any:
        budget = self.budget()
        budget.spend(_size(argument, budget.left), "a subscript")  # hashing a tuple key
        value = super().getitem(obj, argument)
        if isinstance(argument, slice):
            budget.spend(_size(value, budget.left), "a slice")
        return value

    def wrap_str_format(self, value: Any) -> Any:
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        form: str = value.__self__

        @wraps(wrapped)
        def metered(*args: Any, **kwargs: Any) -> Any:
            budget = self.budget()
            values = (*args, *kwargs.values())
            size = len(form) + _format_widths(form) + sum(_size(v, budget.left) for v in values)
            budget.reserve(size, f"str.{value.__name__}")
            return wrapped(*args, **kwargs)

        return metered

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        budget = __self.budget()
        args = _charge_call(budget, __obj, args, kwargs)
        if budget.depth >= MAX_DEPTH:
            raise _refused(
                f"calls nest more than {MAX_DEPTH} deep (calling {_call_name(__obj)}): "
                "a macro that calls itself without end?"
            )
        budget.depth += 1
        try:
            result = super().call(__context, __obj, *args, **kwargs)
        finally:
            budget.depth -= 1
        budget.spend(_size(result, budget.left), f"calling {_call_name(__obj)}")
        return result
