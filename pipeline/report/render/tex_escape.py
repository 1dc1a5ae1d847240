"""Plain text (the reports' notes, titles and cells) to LaTeX that pdflatex compiles in a plain
``article`` with no extra package and that keeps every symbol.

Rules, in order, per character (after NFC composition):

1. ASCII stays, LaTeX's special characters escaped (``_`` → ``\\_``).
2. The reports' symbols have a fixed form: text ones (``–`` → ``--``, ``…`` → ``\\ldots{}``) or
   math ones (``±`` → ``\\pm``, ``≤`` → ``\\leq``, ``→`` → ``\\rightarrow``).
3. Greek letters by their Unicode name: ``χ`` → ``\\chi``, ``Δ`` → ``\\Delta`` (capitals that
   look Latin, such as ``Α``, upright: ``\\mathrm{A}``).
4. Superscripts and subscripts (``²``, ``⁻``, ``₁``; also ``†``, ``‡``, ``°``) raise or lower
   what they decompose to: ``χ²`` → ``$\\chi^{2}$``.
5. Latin letters with accents keep them as text accents: ``é`` → ``\\'{e}``, ``š`` → ``\\v{s}``.
6. Spaces become spaces; ligatures and width forms their ASCII letters (``ﬁ`` → ``fi``).

Adjacent math pieces share one ``$...$`` (``χ²`` is ``$\\chi^{2}$``, not ``$\\chi$$^{2}$``). A
character none of the rules covers raises ``ValueError`` naming it: it is never dropped or
replaced by ``?``.
"""

from __future__ import annotations

import unicodedata

# rule 2, text mode: LaTeX's special characters and typographic ones
TEXT = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
        "<": r"\textless{}", ">": r"\textgreater{}", "–": "--", "—": "---", "…": r"\ldots{}",
        "§": r"\S{}", "½": "1/2", "\u00a0": "~", "\u2009": r"\,", "\u202f": r"\,", "‘": "`",
        "’": "'", "“": "``", "”": "''", "ß": r"\ss{}", "æ": r"\ae{}", "Æ": r"\AE{}",
        "œ": r"\oe{}", "Œ": r"\OE{}", "ø": r"\o{}", "Ø": r"\O{}", "ł": r"\l{}", "Ł": r"\L{}"}
# rule 2, math mode (without the $)
MATH = {"±": r"\pm", "∓": r"\mp", "−": "-", "×": r"\times", "·": r"\cdot", "≤": r"\leq",
        "≥": r"\geq", "≠": r"\neq", "≈": r"\approx", "∝": r"\propto", "∈": r"\in", "∞": r"\infty",
        "√": r"\surd", "‖": r"\|", "→": r"\rightarrow", "←": r"\leftarrow", "↦": r"\mapsto",
        "⇒": r"\Rightarrow", "↑": r"\uparrow", "↓": r"\downarrow", "∑": r"\sum",
        "∂": r"\partial", "∇": r"\nabla", "⌊": r"\lfloor", "⌋": r"\rfloor", "ℓ": r"\ell",
        "φ": r"\varphi", "ϕ": r"\phi", "ε": r"\varepsilon", "ϵ": r"\epsilon", "ς": r"\varsigma",
        "ϑ": r"\vartheta", "µ": r"\mu", "⊕": r"\oplus", "⊥": r"\perp", "⋯": r"\cdots",
        "⟨": r"\langle", "⟩": r"\rangle", "▸": r"\triangleright"}
# rule 4: symbols set as superscripts
RAISED = {"†": r"\dagger", "‡": r"\ddagger", "°": r"\circ"}
# rule 3: the Greek capitals LaTeX draws unlike Latin ones
GREEK_CAPITALS = ("GAMMA", "DELTA", "THETA", "LAMBDA", "XI", "PI", "SIGMA", "UPSILON", "PHI",
                  "PSI", "OMEGA")
_LATIN_LOOKING = {"ALPHA": "A", "BETA": "B", "EPSILON": "E", "ZETA": "Z", "ETA": "H", "IOTA": "I",
                  "KAPPA": "K", "MU": "M", "NU": "N", "OMICRON": "O", "RHO": "P", "TAU": "T",
                  "CHI": "X"}
# rule 5: combining accents (after NFD) to LaTeX's text accents
ACCENTS = {"\u0300": "\\`", "\u0301": "\\'", "\u0302": "\\^", "\u0303": "\\~", "\u0304": "\\=",
           "\u0306": "\\u", "\u0307": "\\.", "\u0308": '\\"', "\u030a": "\\r", "\u030b": "\\H",
           "\u030c": "\\v", "\u0323": "\\d", "\u0327": "\\c", "\u0328": "\\k"}

Piece = tuple[str, str]  # (kind, LaTeX): kind "text", "math", "sup" or "sub"


def greek(ch: str) -> str | None:
    """Rule 3: the math-mode LaTeX of a Greek letter (``\\alpha``, ``\\Delta``,
    ``\\mathrm{A}``); None when ``ch`` is not one."""
    name = unicodedata.name(ch, "")
    for small, prefix in ((True, "GREEK SMALL LETTER "), (False, "GREEK CAPITAL LETTER ")):
        letter = name[len(prefix):] if name.startswith(prefix) else ""
        if not letter or " " in letter:
            continue
        if small:
            return "o" if letter == "OMICRON" else "\\" + letter.lower()
        if letter in GREEK_CAPITALS:
            return "\\" + letter.capitalize()
        return rf"\mathrm{{{_LATIN_LOOKING[letter]}}}" if letter in _LATIN_LOOKING else None
    return None


def _math_atom(ch: str) -> str | None:
    """A character as math inside a super- or subscript: ASCII digits, letters and ``+=()``,
    the math symbols and Greek letters."""
    if ch.isascii() and (ch.isalnum() or ch in "+=()"):
        return ch
    return MATH.get(ch) or greek(ch)


def _shifted(ch: str) -> Piece | None:
    """Rule 4: ``("sup", "2")`` for ``²``, ``("sub", "1")`` for ``₁``, ``("sup", "\\dagger")``."""
    if ch in RAISED:
        return ("sup", RAISED[ch])
    tag = unicodedata.decomposition(ch).split(" ")[0]
    if tag not in ("<super>", "<sub>"):
        return None
    atom = _math_atom(unicodedata.normalize("NFKD", ch))
    return None if atom is None else ("sup" if tag == "<super>" else "sub", atom)


def _accented(ch: str) -> str | None:
    """Rule 5: ``\\'{e}`` for ``é`` (``i`` and ``j`` dotless under an accent); None otherwise."""
    decomposed = unicodedata.normalize("NFD", ch)
    base, marks = decomposed[0], decomposed[1:]
    if not (marks and base.isascii() and base.isalpha()
            and all(mk in ACCENTS for mk in marks)):
        return None
    out = {"i": r"\i", "j": r"\j"}.get(base, base)
    for mk in marks:
        out = f"{ACCENTS[mk]}{{{out}}}"
    return out


def _piece(ch: str, before: list[Piece], text: str) -> Piece:
    if ch in TEXT:
        return ("text", TEXT[ch])
    if ch.isascii():
        return ("text", ch)
    if ch in MATH:
        return ("math", MATH[ch])
    letter = greek(ch)
    if letter is not None:
        return ("math", letter)
    shifted = _shifted(ch)
    if shifted is not None:
        return shifted
    accented = _accented(ch)
    if accented is not None:
        return ("text", accented)
    if ch in ACCENTS and before and before[-1][0] == "text" and len(before[-1][1]) == 1 \
            and before[-1][1].isalpha():  # a combining accent on a plain letter: x̂
        return ("text", f"{ACCENTS[ch]}{{{before.pop()[1]}}}")
    if unicodedata.category(ch) == "Zs":
        return ("text", " ")
    compat = unicodedata.normalize("NFKD", ch)
    if compat.isascii() and compat.isalnum():  # a ligature or width form: ﬁ -> fi
        return ("text", compat)
    raise ValueError(f"{ch!r} (U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed')}) in {text!r}: "
                     "no LaTeX form; add one to pipeline.report.render.tex_escape.TEXT or MATH")


def _join(parts: list[str]) -> str:
    """Math pieces side by side, a space only where a control word would run into a letter
    (``\\ell o``, not ``\\ello``)."""
    out = ""
    for tex in parts:
        out += (" " if out[-1:].isalpha() and tex[:1].isalpha() else "") + tex
    return out


def _math(pieces: list[Piece]) -> str:
    """One ``$...$`` from adjacent math pieces, runs of superscripts (subscripts) in one group."""
    parts, k = [], 0
    while k < len(pieces):
        kind, tex = pieces[k]
        k += 1
        if kind != "math":
            run = [tex]
            while k < len(pieces) and pieces[k][0] == kind:
                run.append(pieces[k][1])
                k += 1
            tex = ("^" if kind == "sup" else "_") + "{" + _join(run) + "}"
        parts.append(tex)
    return "$" + _join(parts) + "$"


def escape(text: str) -> str:
    """Plain text to LaTeX by the module's rules; ValueError on a character they do not cover."""
    text = unicodedata.normalize("NFC", str(text))
    pieces: list[Piece] = []
    for ch in text:
        pieces.append(_piece(ch, pieces, text))
    out: list[str] = []
    k = 0
    while k < len(pieces):
        if pieces[k][0] == "text":
            out.append(pieces[k][1])
            k += 1
            continue
        end = k
        while end < len(pieces) and pieces[end][0] != "text":
            end += 1
        out.append(_math(pieces[k:end]))
        k = end
    return "".join(out)
