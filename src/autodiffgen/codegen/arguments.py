"""How an Emitter's function reads its arguments and builds its results: an input's path
into a pytree argument (`params['W1']`, `x.W`, a registered type's children), written out
once per input; the outputs rebuilt as the user's containers (dicts, namedtuples,
dataclasses, OrderedDict, defaultdict, registered types); writes into an argument's items.
"""

import ast
import collections

import numpy as np

from ..graph import Node
from ..graph.size_formulas import SymArray
from ..tree import Child, Field, is_namedtuple, kind_of, leaves, registration
from .expressions import (
    call_ast,
    render,
)


class Arguments:
    """Reading the arguments and building the results (a mixin of Emitter)."""

    def path_text(self, path):
        """render(self.path_ast(path)); a path of int keys (`params[3][0]`, one per input
        of a deep net) written out, each length's first checked against the rendering."""
        if any(type(k) is not int or k < 0 for k in path[1:]):
            return render(self.path_ast(path))
        text = self.params[path[0]] + "".join(f"[{k}]" for k in path[1:])
        same = self.paths_checked.get(len(path))
        if same is None:
            same = self.paths_checked[len(path)] = text == render(self.path_ast(path))
        return text if same else render(self.path_ast(path))

    def path_ast(self, path):
        expr = ast.Name(self.params[path[0]], ast.Load())
        for key in path[1:]:
            expr = self.step_ast(expr, key)
        return expr

    def step_ast(self, expr, key):
        """One step into a pytree argument (tree.py): `x['W']`, `x[0]`, a dataclass's
        field `x.W`, or child i of a registered type, `flatten(x)[0][i]`."""
        if type(key) is Field:
            return ast.Attribute(expr, str(key), ast.Load())
        if type(key) is Child:
            flatten = self.function_constant(registration(key.kind)[0], key.kind, "flatten")
            children = ast.Subscript(ast.Call(ast.Name(flatten, ast.Load()), [expr], []),
                                     ast.Constant(0), ast.Load())
            return ast.Subscript(children, ast.Constant(int(key)), ast.Load())
        return ast.Subscript(expr, ast.Constant(key), ast.Load())

    def unpack_inputs(self):
        """Names for the inputs (a Python number stays one, as in the user's code: weak
        beside a float32 array; see numpy_on_numbers for NumPy calls on it). A list
        argument whose items are read only stacked whole (a loop over it: loops/scan.py)
        is not unpacked: `np.stack(xs)`."""
        lines = []
        self.whole_lists = _whole_lists(self.graph)
        stacked_only = _read_only_by(self.graph, self.whole_lists)
        for node in self.graph.inputs:
            if node in self.names or node in stacked_only:  # read by captured_checks
                continue
            path = self.graph.paths.get(node) or node.params["path"]
            if len(path) == 1:
                self.names[node] = name = self.params[path[0]]
                self.ns.used.add(name)
                continue
            name = self.ns.fresh(self.saved.get(node) or node.name or
                                 (node.prim.name if node.prim else "v"))
            self.names[node] = name
            saved = node in self.graph.paths
            lines.append((f"{name} = {self.path_text(path)}",
                          "saved by the forward pass" if saved else "unpack the argument"))
        return lines

    def written_ast(self, path):
        """The target of a write into an argument's container: `bn_param['mean']`."""
        return self.graph.params[path[0]] + "".join(f"[{key!r}]" for key in path[1:])

    def output_ast(self, out):
        node = kind_of(type(out))
        if node is not None:  # an OrderedDict, a defaultdict, a dataclass, a registered type
            return self.container_ast(out, node)
        if is_namedtuple(out):  # rebuilt as the user's own namedtuple class
            return ast.Call(ast.Name(self.constant_name(type(out)), ast.Load()),
                            [self.output_ast(o) for o in out], [])
        if isinstance(out, tuple):
            return ast.Tuple([self.output_ast(o) for o in out], ast.Load())
        if isinstance(out, list):
            return ast.List([self.output_ast(o) for o in out], ast.Load())
        if isinstance(out, dict):
            return ast.Dict([ast.Constant(k) for k in out], [self.output_ast(v) for v in out.values()])
        if isinstance(out, (np.ndarray, SymArray)):
            return call_ast("np.copy", [self.arg_ast(out)])
        return self.arg_ast(out)

    def container_ast(self, out, node):
        """The user's container rebuilt: `OrderedDict([('W', g_W), ...])`,
        `defaultdict(list, {...})`, `Params(W=g_W, b=g_b)`, `unflatten(aux, [...])`."""
        kind = type(out)
        static, keys, children = node.parts(out)
        values = [self.output_ast(c) for c in children]
        if kind is collections.OrderedDict:
            pairs = [ast.Tuple([ast.Constant(k), v], ast.Load()) for k, v in zip(keys, values)]
            return ast.Call(ast.Name(self.constant_name(kind), ast.Load()),
                            [ast.List(pairs, ast.Load())], [])
        if kind is collections.defaultdict:
            factory = static[0]
            factory_ast = ast.Constant(None) if factory is None else \
                ast.Name(self.function_constant(factory, kind, "factory"), ast.Load())
            return ast.Call(ast.Name(self.constant_name(kind), ast.Load()), [
                factory_ast, ast.Dict([ast.Constant(k) for k in keys], values)], [])
        if keys and type(keys[0]) is Field or not keys and registration(kind) is None:
            return ast.Call(ast.Name(self.constant_name(kind), ast.Load()), [],
                            [ast.keyword(str(k), v) for k, v in zip(keys, values)])
        unflatten = self.function_constant(registration(kind)[1], kind, "unflatten")
        return ast.Call(ast.Name(unflatten, ast.Load()),
                        [self.static_ast(static, kind), ast.List(values, ast.Load())], [])


def _whole_lists(graph):
    """{a stack of consecutive items of a list argument, in order: (the argument's number,
    the first item, the item past the last, whether they are all its items)}."""
    items = {}
    for node in graph.inputs:
        path = graph.paths.get(node) or node.params.get("path")
        if path and len(path) >= 2:
            items.setdefault(path[0], []).append(path[1:])
    runs = {}
    for node in graph.nodes:
        if node.prim is None or node.prim.name != "stack" or node.params.get("axis") != 0 \
                or not all(type(a) is Node and a.prim is None and a not in graph.paths
                           for a in node.args):
            continue
        paths = [a.params.get("path") for a in node.args]
        first = paths[0]
        mine = items.get(first[0], []) if first is not None else []
        if first is None or len(first) != 2 or type(first[1]) is not int \
                or mine != [(k,) for k in range(len(mine))] \
                or paths != [(first[0], first[1] + k) for k in range(len(paths))]:
            continue  # (the list's items must be its leaves, 0 to len - 1)
        end = first[1] + len(paths)
        runs[node] = (first[0], first[1], end, first[1] == 0 and end == len(mine))
    return runs


def _read_only_by(graph, whole):
    """The inputs read by nothing but those stacks (and not returned)."""
    inside = {a for stack in whole for a in stack.args}
    if not inside:
        return set()
    read = {a for n in graph.nodes if n not in whole for a in n.args if type(a) is Node}
    read |= {o for o in leaves(graph.outputs) if type(o) is Node}
    return inside - read
