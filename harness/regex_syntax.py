"""The regex subset a `Regex` check may use, vetted by one scanner and compiled by the engine that matches.

`harness.checks.Regex` matches with the `regex` engine (VERSION0). Its syntax is a superset of Python's
`re` with different meanings in places: `(?:abc){e<=2}` is literal text to `re` and a fuzzy match to
`regex`. `validate_safe_pattern` therefore accepts only the subset both engines read alike, refuses
what could make matching super-linear or stateful, and compiles the pattern with `regex` itself, so
validation and matching never disagree. The accepted and refused features are listed in its docstring.
"""

from __future__ import annotations

import regex as safe_regex

MAX_REGEX_CHARS = 200

# Escapes with the same meaning in Python's `re` and in the `regex` engine: character classes, anchors,
# control characters and hex/unicode escapes. Every other ASCII letter or digit after a backslash is
# refused (backreferences, and `regex`-only syntax such as \p{..}, \G, \X, \K, \m, \L<..>).
_SAFE_LETTER_ESCAPES = frozenset("dDwWsSbBAZntrfvaxuU0")
_ESCAPE_NAMES = {
    "g": "backreference",
    "k": "backreference",
    "p": "Unicode property",
    "P": "Unicode property",
    "N": "named character",
    "G": "search anchor \\G",
    "K": "match reset \\K",
    "L": "named list",
}
_GROUP_NAMES = (
    ("(?:", ""),
    ("(?=", "lookahead"),
    ("(?!", "lookahead"),
    ("(?<=", "lookbehind"),
    ("(?<!", "lookbehind"),
    ("(?<", "named group"),
    ("(?P", "named group"),
    ("(?(", "conditional"),
    ("(?>", "atomic group"),
    ("(?#", "comment group"),
    ("(?|", "branch reset"),
    ("(?&", "recursion"),
    ("(?R", "recursion"),
    ("(?+", "recursion"),
)
_SET_OPERATIONS = ("--", "&&", "||", "~~")


def _is_repeat_count(body: str) -> bool:
    """`body` of `{body}` is m, m, ,n or m,n (ASCII digits): anything else in braces is fuzzy matching or literal."""
    lo, comma, hi = body.partition(",")
    lo_ok, hi_ok = lo.isascii() and lo.isdigit(), hi.isascii() and hi.isdigit()
    return (lo_ok and (not hi or hi_ok)) or (bool(comma) and not lo and hi_ok)


def _refuse(why: str, pos: int) -> ValueError:
    return ValueError(f"regex feature not allowed: {why} (at position {pos})")


def _check_escape(pattern: str, i: int) -> None:
    c = pattern[i + 1] if i + 1 < len(pattern) else ""
    if c.isdigit() and c != "0":
        raise _refuse("backreference", i)
    if c.isascii() and c.isalnum() and c not in _SAFE_LETTER_ESCAPES:
        raise _refuse(_ESCAPE_NAMES.get(c, f"escape \\{c}"), i)


def _skip_class(pattern: str, i: int) -> int:
    """Index after the character class opening at `i`; refuses nested sets, POSIX classes and set operations."""
    j = i + 1
    if pattern.startswith("^", j):
        j += 1
    if pattern.startswith("]", j):  # a leading ']' is a literal
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        if pattern[j] == "\\":
            _check_escape(pattern, j)
            j += 2
            continue
        if pattern[j] == "[":
            raise _refuse("nested set or POSIX class (write a literal '[' as \\[)", j)
        if pattern.startswith(_SET_OPERATIONS, j):
            raise _refuse(f"set operation {pattern[j : j + 2]!r}", j)
        j += 1
    return j + 1


def _repeat_at(pattern: str, i: int) -> tuple[str, int]:
    """The quantifier starting at `i` ("" when there is none) and the index after it (lazy `?` included)."""
    c = pattern[i] if i < len(pattern) else ""
    if c in ("*", "+", "?"):
        end = i + 1
    elif c == "{":
        close = pattern.find("}", i)
        if close < 0 or not _is_repeat_count(pattern[i + 1 : close]):
            raise _refuse(
                "'{' that is not a repeat count like {2,5} ({e<=2} is fuzzy matching; a literal '{' is \\{)", i
            )
        end = close + 1
    else:
        return "", i
    if pattern.startswith("?", end):  # lazy
        end += 1
    if pattern.startswith("+", end):
        raise _refuse("possessive quantifier", end)
    if end < len(pattern) and pattern[end] in "*+?{":
        raise _refuse("repeated quantifier", end)
    return c, end


def _no_repeat_after_anchor(pattern: str, end: int) -> None:
    # `regex` repeats a zero-width anchor (`^{2}`, `\b*`) where `re` refuses to: engine-specific, and meaningless.
    if end < len(pattern) and pattern[end] in "*+?{":
        raise _refuse("quantified anchor", end)


def validate_safe_pattern(pattern: str) -> None:
    """Refuse regex features that make matching super-linear, stateful or engine-specific.

    Patterns are matched by the `regex` engine (VERSION0) and validated here by the same engine, on the
    subset of its syntax that means the same in Python's `re`:

    - allowed: literals, escaped punctuation, `.`, classes `[...]`, the escapes \\d \\D \\w \\W \\s \\S \\b \\B
      \\A \\Z \\n \\t \\r \\f \\v \\a \\0 \\xhh \\uhhhh \\Uhhhhhhhh, anchors, alternation, plain groups `(...)`
      and `(?:...)`, and the quantifiers `*`, `+`, `?`, `{m}`, `{m,}`, `{,n}`, `{m,n}` (lazy `?` allowed)
      whose operand holds no other quantifier or alternation;
    - refused for cost or state: backreferences, lookarounds, conditionals, atomic groups, recursion,
      nested quantifiers such as `(a+)+`, repeated alternation such as `(a|aa)*b`, patterns over
      MAX_REGEX_CHARS;
    - refused as engine-specific: fuzzy matching (`(?:abc){e<=2}`: any `{` that is not a repeat count
      must be escaped), inline flags and version switches (`(?i)`, `(?r)`, `(?V1)`), named groups, comment
      groups, branch reset, backtracking verbs `(*...)`, possessive quantifiers, quantified anchors
      (`^{2}`, `\\b*`), Unicode properties (`\\p{..}`), `\\G`, `\\K`, `\\X`, named lists and every other
      letter escape, nested sets, POSIX classes and set operations inside classes (`[[a-z]--[aeiou]]`).

    The timeout in `Regex.evaluate` is the second line of defence.
    """
    if len(pattern) > MAX_REGEX_CHARS:
        raise ValueError(f"regex longer than {MAX_REGEX_CHARS} characters")
    # Per open group: does it hold a quantifier / an alternation? A repeated group (`*`, `+`, `{`) may hold
    # neither: (a+)+ and (a|aa)*b both backtrack exponentially.
    frames: list[list[bool]] = [[False, False]]
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            _check_escape(pattern, i)
            i += 2
            if pattern[i - 1 : i] in ("b", "B", "A", "Z"):
                _no_repeat_after_anchor(pattern, i)
        elif c in ("^", "$"):
            i += 1
            _no_repeat_after_anchor(pattern, i)
        elif c == "[":
            i = _skip_class(pattern, i)
        elif c == "(":
            if pattern.startswith("(*", i):
                raise _refuse("backtracking verb", i)
            if pattern.startswith("(?", i):
                name = next((why for token, why in _GROUP_NAMES if pattern.startswith(token, i)), None)
                if name is None:
                    follows = pattern[i + 2 : i + 3]
                    name = "inline flag" if follows.isalpha() or follows == "-" else "recursion or group syntax"
                if name:
                    raise _refuse(name, i)
                i += 2  # past "(?"; the ":" is skipped below
            frames.append([False, False])
            i += 1
        elif c == ")":
            inner_q, inner_a = frames.pop() if len(frames) > 1 else (False, False)
            quant, i = _repeat_at(pattern, i + 1)
            repeated = quant in ("*", "+", "{")
            if inner_q and repeated:
                raise ValueError("regex feature not allowed: nested quantifier")
            if inner_a and repeated:
                raise ValueError("regex feature not allowed: repeated alternation")
            frames[-1][0] |= inner_q or bool(quant)
            frames[-1][1] |= inner_a
            continue
        elif c == "|":
            frames[-1][1] = True
            i += 1
        else:
            quant, end = _repeat_at(pattern, i)
            if quant:
                frames[-1][0] = True
                i = end
            else:
                i += 1
    try:
        safe_regex.compile(pattern, safe_regex.VERSION0)
    except safe_regex.error as e:
        raise ValueError(f"invalid regex: {e}") from None
