"""Issue 23 §4: the project's own algorithm reference, docs/algorithms.md.

* every ``docs/algorithms.md#anchor`` cited in the code names a heading that exists (GitHub's
  anchor rule: lower case, punctuation dropped, spaces to hyphens), and the code cites no other
  ``algorithms.md`` (a file outside the repository);
* every registered policy — read from the registry when the test runs, so a policy added later
  without its section fails here — has a section stating its registry name;
* the page's own links to its sections resolve.
"""
from __future__ import annotations

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "algorithms.md")
CODE_DIRS = ("accounting", "mechanisms", "policies", "audits", "dpledger")
CITE = re.compile(r"docs/algorithms\.md#([\w\-]+)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, drop what is not a letter, digit, space, hyphen
    or underscore, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _sections() -> dict[str, str]:
    """anchor → the section's text (up to the next heading of any level)."""
    text = open(DOC, encoding="utf-8").read()
    parts = re.split(r"^(#{1,6} .+)$", text, flags=re.M)
    out: dict[str, str] = {}
    for head, body in zip(parts[1::2], parts[2::2], strict=True):
        anchor = slug(head.lstrip("#"))
        assert anchor not in out, f"two headings give the anchor #{anchor}"
        out[anchor] = body
    return out


def _code_files():
    for d in CODE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(ROOT, d)):
            for f in files:
                if f.endswith(".py"):
                    yield os.path.join(dirpath, f)


def test_slug_rule():
    assert slug("DP-TS-UCB") == "dp-ts-ucb"
    assert slug("Beta Thompson sampling") == "beta-thompson-sampling"
    assert slug("Hu & Hegde 2022") == "hu--hegde-2022"


def test_every_cited_anchor_exists():
    anchors = set(_sections())
    cited, bad, bare = 0, [], []
    for path in _code_files():
        rel = os.path.relpath(path, ROOT)
        for i, line in enumerate(open(path, encoding="utf-8"), 1):
            for m in CITE.finditer(line):
                cited += 1
                if m.group(1) not in anchors:
                    bad.append(f"{rel}:{i}: #{m.group(1)}")
            rest = CITE.sub("", line)
            if "algorithms.md" in rest:
                bare.append(f"{rel}:{i}: {line.strip()[:80]}")
    assert cited >= 40, cited                 # the code does cite the page
    assert not bad, "anchors missing from docs/algorithms.md:\n" + "\n".join(bad)
    assert not bare, ("algorithms.md cited without docs/…#anchor (a file outside the repository, "
                      "or no section):\n" + "\n".join(bare))


def test_every_registered_policy_has_a_section():
    from dpledger.policies import registry
    names = sorted(set(registry._REGISTRY) | set(registry.available())
                   | set(registry._CONTEXTUAL) | set(registry.contextual_available()))
    sections = _sections()
    documented = {}
    for anchor, body in sections.items():
        m = re.search(r"^Registry name: `([^`]+)`", body, flags=re.M)
        if m:
            documented.setdefault(m.group(1), anchor)
    missing = [n for n in names if n not in documented]
    assert not missing, f"registered policies without a section in docs/algorithms.md: {missing}"
    for name, anchor in documented.items():
        assert name in names, f"section #{anchor} documents {name}, which is not registered"
        body = sections[anchor]
        assert re.search(r"Provenance: (faithful|faithful to public implementations|"
                         r"reconstructed)", body), anchor


@pytest.mark.parametrize("name", ["dp-ts-ucb", "anytime-lazy-ucb", "dp-klucb", "dp-imed",
                                  "mts-gaussian", "ts-gaussian"])
def test_reconstructed_policies_say_what_is_ours(name):
    """A policy labelled reconstructed says, in its section, what was reconstructed and why."""
    from dpledger.policies.registry import policy_class
    assert policy_class(name).provenance.startswith("reconstructed")
    body = next(b for b in _sections().values() if f"Registry name: `{name}`" in b)
    assert "Provenance: reconstructed" in body
    assert re.search(r"\*\*Reconstructed[^*]*\*\*|reconstructed \(theorem constant\)", body)


def test_internal_links_resolve():
    text = open(DOC, encoding="utf-8").read()
    anchors = set(_sections())
    links = re.findall(r"\]\(#([\w\-]+)\)", text)
    assert links
    assert [a for a in links if a not in anchors] == []


def test_contextual_placeholder_present():
    assert "contextual-and-linear-policies" in _sections()
