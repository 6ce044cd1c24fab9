"""Claims a reader can scan (issue 34 §6): every claims file opens with one table — the claim,
its verdict, the one number that decides it, a link to its full numbers below — and keeps the
full numbers after it.

:func:`claims_markdown` writes that form for an experiment's claims (``run_experiment``'s
claims.md); :func:`rewrite_claims_file` puts the table in front of a claims file written before
the table existed (the full-size runs kept in docs/), from the claim lines it holds, so that the
table and the numbers below it cannot disagree::

    python -m dpledger.experiments.claims_table docs/azize-2025-claims.md
"""
from __future__ import annotations

import re
import sys
from typing import Sequence

_VERDICTS = ("NOT confirmed", "confirmed", "not testable here")
# "- text — **verdict**: evidence", verdict possibly "not applicable: outside … (…)"
_LINE = re.compile(r"^- (?P<text>.*?) — \*\*(?P<mark>[^*]+)\*\*: (?P<evidence>.*)$")
_DECIDER_CHARS = 90


def verdict_of(mark: str) -> str:
    """The verdict column: confirmed, NOT confirmed, not testable here, not applicable."""
    return "not applicable" if mark.startswith("not applicable") else mark


def decider(evidence: str) -> str:
    """The number that decides a claim: the first clause of its evidence (up to the first ";",
    and if that is long, up to the ":" that opens its list of cells), e.g. "13/16 (instance,
    ε) cells by mean final regret" — the count or ratio the verdict is drawn from; shortened
    to 90 characters."""
    head = evidence.split("; ", 1)[0].strip().rstrip(".")
    if len(head) > _DECIDER_CHARS and ": " in head:
        head = head.split(": ", 1)[0]
    return head if len(head) <= _DECIDER_CHARS else head[:_DECIDER_CHARS - 1].rstrip() + "…"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(rows: Sequence[tuple[str, str, str, str]]) -> str:
    """The table of (claim, verdict, deciding number, anchor) rows."""
    out = ["| claim | verdict | deciding number | numbers |", "|---|---|---|---|"]
    out += [f"| {_cell(c)} | **{_cell(v)}** | {_cell(d)} | [below](#{a}) |"
            for c, v, d, a in rows]
    return "\n".join(out) + "\n"


def claims_markdown(claims: Sequence) -> tuple[str, str]:
    """An experiment's claims (:class:`~dpledger.experiments.common.Claim`) as (the table,
    the full lines each under its anchor)."""
    rows, full = [], []
    for n, c in enumerate(claims, 1):
        line = c.line()
        m = _LINE.match(line)
        mark = m.group("mark") if m else ""
        rows.append((c.text, verdict_of(mark), c.decides or decider(c.evidence), f"claim-{n}"))
        full.append(f'<a id="claim-{n}"></a>\n{line}')
    return table(rows), "\n".join(full) + "\n"


def rewrite_claims_file(text: str) -> str:
    """``text`` (a claims file of claim lines, perhaps several runs' files joined) with one
    table of all its claims after its first heading and an anchor before every claim line.  A
    file that already opens with the table is rebuilt from its lines (idempotent)."""
    lines = [ln for ln in text.splitlines() if not ln.startswith('<a id="claim-')]
    if "| claim | verdict | deciding number | numbers |" in lines:    # the table written before
        i = lines.index("| claim | verdict | deciding number | numbers |")
        j = i + 1
        while j < len(lines) and lines[j].startswith("|"):
            j += 1
        while j < len(lines) and (not lines[j].strip() or lines[j] == "Full numbers:"):
            j += 1
        lines = lines[:i] + lines[j:]
    rows, body, n = [], [], 0
    for ln in lines:
        m = _LINE.match(ln)
        if m:
            n += 1
            rows.append((m.group("text"), verdict_of(m.group("mark")),
                         decider(m.group("evidence")), f"claim-{n}"))
            body.append(f'<a id="claim-{n}"></a>')
        body.append(ln)
    if not rows:
        return text
    first = next(i for i, ln in enumerate(body) if ln.startswith("# ")) if any(
        ln.startswith("# ") for ln in body) else -1
    head, rest = body[:first + 1], body[first + 1:]
    while rest and not rest[0].strip():
        rest = rest[1:]
    return "\n".join(head + ["", table(rows).rstrip("\n"), "", "Full numbers:", ""] + rest) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    for path in (sys.argv[1:] if argv is None else argv):
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(rewrite_claims_file(text))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
