"""The user's loops in a trace: which recorded nodes each step of a loop made.

Every node recorded for the user's code carries its site (Node.site): for each of the
user's frames, innermost first, (id(frame), code, bytecode offset), the frame's place when
the node was made. A loop is a backward jump in a code object's bytecode (`dis`, the same
rule on Python 3.10 to 3.13: a jump whose target comes before it); the loop holding a
node is the innermost loop around its offset, in the innermost of its frames that is in
one. Consecutive nodes of one loop in one frame are one run of the loop; a run is cut
into steps where the place goes back (its offsets, from the loop's frame inward, compare
lower than the node before's: the code jumped back to an earlier statement of the body,
or its header), or where the same place makes the step's first primitive again from
what the step made (a body of one statement). Nothing is traced for this: the frames are walked when the node is made
already (trace/context.user_stack).

What is found here is only a claim: loops/roll.py keeps a run as a loop only when its
steps are proven one program, and otherwise writes them out as today.
"""

import dis
import functools
import os
from dataclasses import dataclass


@dataclass(eq=False)
class Run:
    """One run of a loop: the code and the loop's (first, last) offsets, and its steps,
    each the list of forward nodes it recorded, in order."""

    code: object
    loop: tuple
    steps: list

    def line(self):
        """The loop's first line."""
        return _line_of(self.code, self.loop[0])

    def where(self):
        """`file.py:12`: the loop's first line."""
        return f"{os.path.basename(self.code.co_filename)}:{self.line()}"


def runs(nodes):
    """The runs of loops among `nodes` (a trace's forward nodes, in the order recorded),
    each with at least two steps."""
    found, current, last_key, last_place = [], None, None, None
    for node in nodes:
        key, place = _place(node)
        if key is None or key != last_key:
            current = None
            if key is not None:
                current = Run(key[1], key[2], [[node]])
                found.append(current)
        elif place < last_place or place == last_place and _again(node, current.steps[-1]):
            current.steps.append([node])  # back to an earlier statement, or the header
        else:
            current.steps[-1].append(node)
        last_key, last_place = key, place
    return [run for run in found if len(run.steps) >= 2]


def exit_of(run):
    """Whether the run is a `while` loop's (its backward jump goes to no FOR_ITER) whose
    steps each end with a test of a traced value (a guard: `while err > tol:`, `if done:
    break`), the last step's test giving the other outcome: the loop ran until the test
    said stop, and its code can run until it says so again."""
    if _opname(run.code, run.loop[0]) == "FOR_ITER":
        return False
    ends = [step[-1] for step in run.steps]
    if not all(n.prim is not None and n.prim.name == "guard" and n.prim.op is not None
               and n.params["test"] == "bool" for n in ends):
        return False
    first, last = ends[0].params["outcome"], ends[-1].params["outcome"]
    return last != first and all(n.params["outcome"] == first for n in ends[:-1]) and \
        len({(n.site[0][1:] if n.site else None) for n in ends}) == 1 and \
        not _python_decides(run)


def _python_decides(run):
    """Whether a conditional jump in the loop, in its own code, is at no traced test: a
    decision on Python values the trace does not see (`while n < 4 and err > tol:`, an
    inner loop), which the code could not take again. Jumps in branches the steps did not
    take count too (the code cannot tell)."""
    tested = {offset for step in run.steps for node in step
              if node.prim is not None and node.prim.name == "guard"
              for _, code, offset in node.site if code is run.code}
    first, last = run.loop
    before = None
    for ins in dis.get_instructions(run.code):
        if first <= ins.offset <= last and (ins.opname == "FOR_ITER" or "_IF_" in ins.opname) \
                and ins.offset not in tested \
                and not (before is not None and before.offset in tested):  # (3.13: the
            # bool is read by TO_BOOL, or by COMPARE_OP itself, just before the jump)
            return True
        before = ins
    return False


def _opname(code, offset):
    return next((ins.opname for ins in dis.get_instructions(code) if ins.offset == offset),
                None)


def _again(node, step):
    """At the same place as the node before, the step's first primitive again, reading
    what the step made: the same statement run again (`h = np.tanh(h)`, a body of one
    call), not one call that records several nodes (np.linalg.norm)."""
    first = step[0]
    if node.prim is not first.prim:
        return False
    made = set(step)
    return any(a in made for a in node.args)


def _place(node):
    """((frame id, code, loop), the offsets from that frame inward) of the innermost loop
    around the node, or (None, None)."""
    return _place_of(node.site)


@functools.lru_cache(maxsize=65536)
def _place_of(site):
    """_place of a site (the nodes of one statement share it, and each roll of a loop
    looks for the runs again: once a site, not once a node and a roll)."""
    for i, (frame, code, offset) in enumerate(site):
        loop = _innermost(code, offset)
        if loop is not None:
            return (frame, code, loop), tuple(s[2] for s in reversed(site[:i + 1]))
    return None, None


def _innermost(code, offset):
    best = None
    for first, last in loops_of(code):
        if first <= offset <= last and (best is None or last - first < best[1] - best[0]):
            best = (first, last)
    return best


@functools.lru_cache(maxsize=1024)
def loops_of(code):
    """The (first, last) offsets of each loop in `code`: a jump to an earlier offset."""
    return tuple((ins.argval, ins.offset) for ins in dis.get_instructions(code)
                 if (ins.opcode in dis.hasjrel or ins.opcode in dis.hasjabs)
                 and isinstance(ins.argval, int) and ins.argval < ins.offset)


def _line_of(code, offset):
    line = code.co_firstlineno
    for start, number in dis.findlinestarts(code):
        if start > offset:
            break
        if number is not None:
            line = number
    return line
