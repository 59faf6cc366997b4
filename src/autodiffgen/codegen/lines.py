"""Lines of at most WIDTH characters: a generated statement broken where Python allows
(inside brackets, at commas, a long string in pieces) and docstrings filled, so that no
generated line is longer than ruff's E501 allows and none changes what it means."""

import bisect
import io
import math
import re
import textwrap
import tokenize

WIDTH = 100  # ruff E501 at 100: no generated line is longer (where it can be broken)


def wrap(line, width=WIDTH):
    """One line of code as lines of at most `width` characters, as a careful person wraps
    it: after a comma inside brackets, the next line starting under the bracket's first
    item; else after the first bracket, the rest on the next line, indented (a message
    stays whole: `raise GuardFailure(` / `'...')`); else a long string literal inside
    brackets as adjacent literals, one per line. What cannot be broken so stays as it is."""
    if len(line) <= width:
        return [line]
    lines = _at_commas(line, width)
    if max(map(len, lines)) <= width:
        return lines
    for layout, inside in ((_hanging(line, width), True), (lines, False)):
        split = layout and [piece for k, one in enumerate(layout)
                            for piece in _split_strings(one, width, inside and k > 0)]
        if split and max(map(len, split)) <= width:
            return split
    return split


def _hanging(line, width):
    """The line broken after its first opening bracket (None if it has none)."""
    text = line.lstrip()
    indent = len(line) - len(text)
    at = next((end for kind, _, end, opened in _tokens(text)
               if kind in ("(", "[", "{") and opened is None), None)
    if at is None or not text[at:].strip():
        return None
    return [line[:indent + at]] + _at_commas(" " * (indent + 4) + text[at:].lstrip(), width)


def _at_commas(line, width):
    """The line broken after commas inside brackets, as few times as will do; a line
    does not end at a comma whose next line would hang past the middle of the width
    while an earlier comma fits (`'v': {'W1': v,` and the rest under its brace)."""
    text = line.lstrip()
    indent = len(line) - len(text)
    breaks = [(at, opened) for kind, _, at, opened in _tokens(text)
              if kind == "," and opened is not None]
    at_of = [at for at, _ in breaks]  # increasing: bisect, not a scan per line (linear)
    lines = []  # (start in text, column of that start)
    start, column = 0, indent
    while column + len(text) - start > width:
        later = bisect.bisect_right(at_of, start)
        fits = bisect.bisect_right(at_of, start + width - column)  # the last that fits
        if fits > later:  # the last comma that fits, but not one whose next line would
            # hang past the middle (under a bracket opened far right) while another fits
            at, opened = next((b for b in reversed(breaks[later:fits])  # (one line's)
                               if (column + b[1] - start if b[1] >= start
                                   else _column(lines, b[1])) <= width // 2),
                              breaks[fits - 1])
        elif later < len(breaks):
            at, opened = breaks[later]
        else:
            break
        lines.append((start, column))
        column = _column(lines, opened)
        start = at + len(text[at:]) - len(text[at:].lstrip())
    lines.append((start, column))
    ends = [s for s, _ in lines[1:]] + [len(text)]
    return [" " * col + text[s:e].rstrip() for (s, col), e in zip(lines, ends)]


def _column(lines, position):
    """The output column of a position in the text, given where the lines start."""
    start, column = lines[bisect.bisect_right(lines, (position, math.inf)) - 1]
    return column + position - start


def _tokens(text):
    """(token, its start, its end, the end of the innermost open bracket or None), of a
    line that may end inside brackets (a part of a wrapped line)."""
    opens, depth, first = [], 0, 0  # Python 3.12 tokenizes an f-string's inside: here,
    try:                                # the whole f-string is one STRING
        for tok in tokenize.generate_tokens(io.StringIO(text + "\n").readline):
            kind = tok.string if tok.type == tokenize.OP else tokenize.tok_name[tok.type]
            if kind == "FSTRING_START" or depth:
                first = tok.start[1] if not depth else first
                depth += (kind == "FSTRING_START") - (kind == "FSTRING_END")
                if not depth:
                    yield "STRING", first, tok.end[1], opens[-1] if opens else None
                continue
            if kind in (")", "]", "}") and opens:
                opens.pop()
            yield kind, tok.start[1], tok.end[1], opens[-1] if opens else None
            if kind in ("(", "[", "{"):
                opens.append(tok.end[1])
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return


def _split_strings(line, width, inside=False):
    """A line still too long: its first long string literal inside brackets (`inside`: the
    line is inside brackets) split into adjacent literals at spaces, each on a line of its
    own under the first."""
    if len(line) <= width:
        return [line]
    text = line.lstrip()
    indent = len(line) - len(text)
    for kind, start, end, opened in _tokens(text):
        if kind != "STRING" or opened is None and not inside or end - start < 20:
            continue
        column = indent + start
        tail = text[end:]
        pieces = _string_pieces(text[start:end], width - column - len(tail.split(",")[0]))
        if len(pieces) < 2:
            continue
        head = " " * indent + text[:start] + pieces[0]
        return [head] + [" " * column + p for p in pieces[1:-1]] + \
            [" " * column + pieces[-1] + tail]
    return [line]


_PREFIX = re.compile(r"^([A-Za-z]*)('|\")")


def _string_pieces(literal, room):
    """'a b c' as 'a ' 'b c', each at most `room` characters, split at spaces outside an
    f-string's braces; a piece with no placeholder is a plain string (ruff F541)."""
    match = _PREFIX.match(literal)
    if match is None or literal.startswith(match.group(0) + match.group(2) * 2) or room < 20:
        return [literal]  # a triple-quoted string, or no room to speak of
    prefix, quote = match.groups()
    body = literal[len(prefix) + 1:-1]
    cuts, depth, i = [], 0, 0
    while i < len(body):
        c = body[i]
        if "f" in prefix.lower() and c in "{}" and body[i:i + 2] in ("{{", "}}") and not depth:
            i += 2
            continue
        if "f" in prefix.lower() and c == "{":
            depth += 1
        elif "f" in prefix.lower() and c == "}":
            depth -= 1
        elif c == " " and not depth and body[i - 1:i] != "\\":
            cuts.append(i + 1)
        i += 1
    pieces, start, fits = [], 0, []
    for cut in cuts + [len(body)]:
        if len(prefix) + 2 + cut - start > room and fits:
            clause = [f for f in fits if body[f - 2] in ",:;." and f - start > room * 0.6]
            end = (clause or fits)[-1]  # after a clause rather than inside one
            pieces.append(body[start:end])
            start = end
            fits = [f for f in fits if f > start]
        fits.append(cut)
    pieces.append(body[start:])
    return [_literal(prefix, quote, p) for p in pieces if p]


def _literal(prefix, quote, body):
    if "f" in prefix.lower() and not re.search(r"(?<!\{)\{(?!\{)", body.replace("{{", "")):
        prefix = prefix.replace("f", "").replace("F", "")
        body = body.replace("{{", "{").replace("}}", "}")
    return f"{prefix}{quote}{body}{quote}"


def docstring(text, indent, width=WIDTH):
    """A docstring wrapped at `width` (None if the text needs escapes: render it)."""
    if '"""' in text or "\\" in text or text.endswith('"') or not text.isprintable():
        return None
    glued, depth = [], 0  # a line breaks between words and between argument specs only
    for i, c in enumerate(text):
        depth += (c in "([") - (c in ")]")
        free = depth == 0 and text[i + 1:i + 2] not in "(<=" and text[i - 1] not in "<=" \
            or depth == 1 and text[i - 1] == ","
        glued.append("\0" if c == " " and not free else c)
    lines = [line.replace("\0", " ") for line in textwrap.wrap(
        "".join(glued), width - len(indent) - 3, break_long_words=False,
        break_on_hyphens=False)]
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    return [f'{indent}"""{lines[0]}'] + [indent + li for li in lines[1:-1]] + \
        [f'{indent}{lines[-1]}"""']
