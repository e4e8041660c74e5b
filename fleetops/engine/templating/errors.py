"""The one error a template gives: a line that says what went wrong, and which variable."""
from __future__ import annotations

class TemplateError(Exception):
    """One-line template problem: "undefined variable 'x'" or "template error: ...".

    `variable` names the undefined top-level variable when that is the problem.
    """

    def __init__(self, msg: str, variable: str | None = None):
        super().__init__(msg)
        self.msg = msg
        self.variable = variable
