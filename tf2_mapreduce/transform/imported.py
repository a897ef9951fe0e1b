"""A function traced once, its graph imported into a map step being traced, pruned to the
outputs the step needs: the workers compute what was traced, and nothing else of it."""

from tf2_mapreduce.lazy_tf import tf

__all__ = ["Importable", "names_of"]


def names_of(structure) -> list:
    """The name each flat component of `structure` ({name: spec}, flattened as
    tf.nest flattens it, composites expanded) belongs to."""
    return [name for name in sorted(structure) for _ in tf.nest.flatten(structure[name], expand_composites=True)]


class Importable:
    """The graph of `function` (a ConcreteFunction of one argument, a dict of features),
    ready to import: `inputs` ({feature: its components' placeholders, tensor names}),
    `outputs` (its flat outputs' tensor names), `captured` ([(placeholder's tensor name,
    the tensor it captures)]) and `graph_def`, which its owner may rewrite before importing."""

    def __init__(self, function):
        graph = function.graph
        args = len(graph.inputs) - len(graph.internal_captures)
        self.inputs = {}
        for name, tensor in zip(names_of(function.structured_input_signature[0][0]), graph.inputs[:args]):
            self.inputs.setdefault(name, []).append(tensor.name)
        self.outputs = [tensor.name for tensor in graph.outputs]
        self.captured = [
            (internal.name, external) for external, internal in zip(function.captured_inputs, graph.internal_captures)
        ]
        self.graph_def = graph.as_graph_def()
        # The functions it calls (tf.cond's branches) are added to each step's graph as
        # functions of its own, which TensorFlow sends to the workers with the step; the
        # imported library alone stays where it was traced.
        self._functions = list(graph._functions.values())
        self.graph_def.library.Clear()
        # TensorFlow makes a function's outputs wait for all its stateful ops (every lookup,
        # every table's initialization): each output is to wait for what it is computed from alone.
        returned = {tensor.op.name for tensor in graph.outputs}
        for node in self.graph_def.node:
            if node.name in returned:
                node.input[:] = [i for i in node.input if not i.startswith("^")]

    def _pruned(self, wanted: list):
        """The GraphDef of what the outputs `wanted` are computed from, through control edges
        and colocations too (an op placed with another needs it in the graph), its nodes in
        their order, as TensorFlow's extract_sub_graph makes it (which is deprecated, and
        says so on stderr)."""
        nodes = {node.name: node for node in self.graph_def.node}
        kept, left = set(), [t.split(":")[0] for t in wanted]
        while left:
            name = left.pop()
            if name not in kept:
                kept.add(name)
                node = nodes[name]
                left.extend(i.lstrip("^").split(":")[0] for i in node.input)
                left.extend(c[len(b"loc:@") :].decode() for c in node.attr["_class"].list.s if c.startswith(b"loc:@"))
        pruned = tf.compat.v1.GraphDef()
        pruned.versions.CopyFrom(self.graph_def.versions)
        pruned.library.CopyFrom(self.graph_def.library)
        pruned.node.extend(node for node in self.graph_def.node if node.name in kept)
        return pruned

    def needed(self, wanted: list) -> set:
        """The names of the nodes that the outputs `wanted` are computed from, through
        control edges too: what `imported` imports of them."""
        return {node.name for node in self._pruned(wanted).node}

    def features_among(self, nodes: set) -> set:
        """The features some component of which is a placeholder among `nodes`."""
        return {name for name, parts in self.inputs.items() if any(p.split(":")[0] in nodes for p in parts)}

    def imported(self, features: dict, wanted: list, capture, name: str) -> list:
        """The outputs `wanted` (of `outputs`) computed in the graph being traced from
        `features` ({name: tensor, SparseTensor}; those they are computed from at least),
        each captured tensor they need given by `capture(placeholder name, captured
        tensor)`. Only what they are computed from is imported: a stateful op they do not
        need (a lookup, a table's initialization from a file) does not run."""
        graph = tf.compat.v1.get_default_graph()
        graph_def = self._pruned(wanted)
        nodes = {node.name for node in graph_def.node}
        input_map = {}
        for feature in set(features) & set(self.inputs):
            parts = tf.nest.flatten(features[feature], expand_composites=True)
            input_map.update((n, t) for n, t in zip(self.inputs[feature], parts) if n.split(":")[0] in nodes)
        for placeholder, external in self.captured:
            if placeholder.split(":")[0] in nodes:
                input_map[placeholder] = capture(placeholder, external)
        for function in self._functions:
            graph._add_function_recursive(function)
        return tf.graph_util.import_graph_def(graph_def, input_map=input_map, return_elements=wanted, name=name)
