"""Keep an int8 ONNX model's weights int8 in memory.

The default model stores each weight as int8 plus a float scale, turned back into float32 by a
``Cast`` and a ``Mul`` in the graph. ONNX Runtime's constant folding runs those once at load, so
the session holds every weight as float32: four times the file (90 MB for a 23 MB model), about
a fifth of an idle server's resident memory. This module rewrites the graph, before ONNX Runtime
sees it, so the weights are never widened:

* ``MatMul(x, Cast(Wq) * s)`` with one scale per output column becomes ONNX Runtime's
  ``MatMulNBits`` with 8-bit weights (the same int8 values, offset by 128, its default zero
  point) and the same scales repeated per block;
* ``Gather(Cast(Wq) * s, ids)`` (embedding tables, one scale per row) becomes
  ``Cast(Gather(Wq, ids)) * Gather(s, ids)``: only the looked-up rows are widened (exact).

The matrix products then run in int8 (``accuracy_level`` 4: the activations are quantised per
block of 16 values), which is where the vectors move: cosine >= 0.9998 to the file's own graph,
nDCG@10 -0.0002 on SciFact and -0.0008 on NFCorpus, queries faster (docs/benchmarks.md).

Anything else is left as it was. The protobuf is edited at the wire level, by hand, because the
``onnx`` package (and its dependencies) would cost more install size than the model itself; the
handful of ONNX message fields touched are listed below, from onnx/onnx.proto.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

__all__ = ["keep_weights_int8"]

# ModelProto fields.
_MODEL_GRAPH, _MODEL_OPSET = 7, 8
# GraphProto fields.
_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_INPUT, _GRAPH_OUTPUT, _GRAPH_VALUE_INFO = 1, 5, 11, 12, 13
# NodeProto fields.
_NODE_INPUT, _NODE_OUTPUT, _NODE_NAME, _NODE_OP, _NODE_ATTR, _NODE_DOMAIN = 1, 2, 3, 4, 5, 7
# AttributeProto fields and the INT type.
_ATTR_NAME, _ATTR_I, _ATTR_TYPE, _ATTR_INT = 1, 3, 20, 2
# TensorProto fields and data types.
_T_DIMS, _T_TYPE, _T_FLOATS, _T_NAME, _T_RAW, _T_LOCATION = 1, 2, 4, 8, 9, 14
_FLOAT, _UINT8, _INT8 = 1, 2, 3
# ValueInfoProto / OperatorSetIdProto fields.
_VI_NAME = 1
_OPSET_DOMAIN, _OPSET_VERSION = 1, 2

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5
_MS_DOMAIN = "com.microsoft"

Field = tuple[int, int, "int | bytes | memoryview"]


class _Unsupported(Exception):
    """The protobuf uses something this editor does not read; the model is used unchanged."""


# -- protobuf wire format ------------------------------------------------------------------------


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise _Unsupported("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(buf: memoryview) -> list[Field]:
    """Every (field number, wire type, value) of one message, in order; bytes stay views."""
    out: list[Field] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | memoryview
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
        elif wire == _BYTES:
            size, pos = _varint(buf, pos)
            value = buf[pos : pos + size]
            pos += size
        elif wire == _FIXED64:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == _FIXED32:
            value, pos = buf[pos : pos + 4], pos + 4
        else:  # groups are not used by ONNX
            raise _Unsupported(f"wire type {wire}")
        if pos > len(buf):
            raise _Unsupported("truncated field")
        out.append((number, wire, value))
    return out


def _put_varint(value: int) -> bytes:
    if value < 0:
        value &= (1 << 64) - 1  # int64 in two's complement, as protobuf encodes it
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _encode(fields: list[Field]) -> bytes:
    parts: list[bytes | memoryview] = []
    for number, wire, value in fields:
        parts.append(_put_varint(number << 3 | wire))
        if wire == _VARINT:
            parts.append(_put_varint(_int(value)))
        elif wire == _BYTES:
            view = _view(value)
            parts.append(_put_varint(len(view)))
            parts.append(view)
        else:
            parts.append(_view(value))
    return b"".join(parts)


def _view(value: int | bytes | memoryview) -> memoryview:
    """A length-delimited field's bytes; a number there means a message we do not understand."""
    if isinstance(value, int):
        raise _Unsupported("number where bytes were expected")
    return memoryview(value)


def _int(value: int | bytes | memoryview) -> int:
    if not isinstance(value, int):
        raise _Unsupported("bytes where a number was expected")
    return value


def _text(value: int | bytes | memoryview) -> str:
    try:
        return bytes(_view(value)).decode("utf-8")
    except UnicodeDecodeError:
        raise _Unsupported("a name that is not UTF-8") from None


# -- the ONNX messages this rewrite reads ------------------------------------------------------


@dataclass
class _Node:
    op: str = ""
    domain: str = ""
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    ints: dict[str, int] = field(default_factory=dict)
    other_attrs: bool = False


def _node(raw: memoryview) -> _Node:
    node = _Node()
    for number, _wire, value in _fields(raw):
        if number == _NODE_INPUT:
            node.inputs.append(_text(value))
        elif number == _NODE_OUTPUT:
            node.outputs.append(_text(value))
        elif number == _NODE_OP:
            node.op = _text(value)
        elif number == _NODE_DOMAIN:
            node.domain = _text(value)
        elif number == _NODE_ATTR:
            attr = {n: v for n, _w, v in _fields(_view(value))}
            if attr.get(_ATTR_TYPE) == _ATTR_INT and _ATTR_I in attr and _ATTR_NAME in attr:
                node.ints[_text(attr[_ATTR_NAME])] = _signed(_int(attr[_ATTR_I]))
            else:
                node.other_attrs = True
    return node


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _new_node(
    op: str, inputs: list[str], outputs: list[str], name: str, *, domain: str = "", **ints: int
) -> bytes:
    fields: list[Field] = [(_NODE_INPUT, _BYTES, i.encode()) for i in inputs]
    fields += [(_NODE_OUTPUT, _BYTES, o.encode()) for o in outputs]
    fields += [(_NODE_NAME, _BYTES, name.encode()), (_NODE_OP, _BYTES, op.encode())]
    for key, value in ints.items():
        attr = _encode(
            [
                (_ATTR_NAME, _BYTES, key.encode()),
                (_ATTR_I, _VARINT, value),
                (_ATTR_TYPE, _VARINT, _ATTR_INT),
            ]
        )
        fields.append((_NODE_ATTR, _BYTES, attr))
    if domain:
        fields.append((_NODE_DOMAIN, _BYTES, domain.encode()))
    return _encode(fields)


def _tensor_name(raw: memoryview) -> str:
    for number, _wire, value in _fields(raw):
        if number == _T_NAME:
            return _text(value)
    return ""


def _tensor(raw: memoryview) -> np.ndarray | None:
    """An int8 or float32 initialiser stored in the file itself, else None."""
    dims: list[int] = []
    dtype = 0
    data: memoryview | None = None
    floats: list[float] = []
    for number, wire, value in _fields(raw):
        if number == _T_DIMS:
            if wire == _BYTES:  # packed
                packed, pos = _view(value), 0
                while pos < len(packed):
                    dim, pos = _varint(packed, pos)
                    dims.append(dim)
            else:
                dims.append(_int(value))
        elif number == _T_TYPE:
            dtype = _int(value)
        elif number == _T_RAW:
            data = _view(value)
        elif number == _T_FLOATS:
            packed = _view(value)  # packed (wire type 2) or one fixed32: both are little-endian
            floats.extend(struct.unpack(f"<{len(packed) // 4}f", packed[: len(packed) // 4 * 4]))
        elif number == _T_LOCATION and value:
            return None  # external data
    if dtype == _INT8 and data is not None:
        array = np.frombuffer(data, dtype=np.int8)
    elif dtype == _FLOAT and data is not None:
        array = np.frombuffer(data, dtype="<f4")
    elif dtype == _FLOAT and floats:
        array = np.asarray(floats, dtype=np.float32)
    else:
        return None
    if array.size != int(np.prod(dims, dtype=np.int64)):
        return None
    return array.reshape(dims)


def _new_tensor(name: str, array: np.ndarray, dtype: int) -> bytes:
    fields: list[Field] = [(_T_DIMS, _VARINT, int(d)) for d in array.shape]
    fields += [
        (_T_TYPE, _VARINT, dtype),
        (_T_NAME, _BYTES, name.encode()),
        (_T_RAW, _BYTES, np.ascontiguousarray(array).tobytes()),
    ]
    return _encode(fields)


# -- the rewrite -------------------------------------------------------------------------------


def keep_weights_int8(
    model: bytes, *, matmuls: bool = True, block_size: int = 16, accuracy_level: int = 4
) -> bytes | None:
    """``model`` with its int8 weights kept int8 in memory, or None when nothing matched.

    Embedding tables are always rewritten (exact). ``matmuls`` also rewrites the matrix
    weights into ``MatMulNBits``, whose ``block_size`` and ``accuracy_level`` are given: level
    4 computes in int8 (activations quantised per block of ``block_size``), level 0 in float
    (exact, but it widens every weight on every call: ~3x slower for one query).
    """
    try:
        return _rewrite(memoryview(model), matmuls, block_size, accuracy_level)
    except _Unsupported:
        return None


def _rewrite(
    model: memoryview, matmuls: bool, block_size: int, accuracy_level: int
) -> bytes | None:
    top = _fields(model)
    graphs = [
        i for i, (number, wire, _v) in enumerate(top) if number == _MODEL_GRAPH and wire == _BYTES
    ]
    if len(graphs) != 1:
        raise _Unsupported("no single graph")
    graph = _fields(_view(top[graphs[0]][2]))

    nodes = [_node(_view(v)) for n, _w, v in graph if n == _GRAPH_NODE]
    inits: dict[str, memoryview] = {}
    for number, _wire, value in graph:
        if number == _GRAPH_INITIALIZER:
            inits[_tensor_name(_view(value))] = _view(value)
    # Names that must keep existing: graph inputs and outputs.
    pinned: set[str] = set()
    for number, _wire, value in graph:
        if number in (_GRAPH_INPUT, _GRAPH_OUTPUT):
            pinned.update(_text(v) for n, _w, v in _fields(_view(value)) if n == _VI_NAME)
    uses = Counter(name for node in nodes for name in node.inputs)
    consumers: dict[str, list[int]] = {}
    for index, node in enumerate(nodes):
        for name in node.inputs:
            consumers.setdefault(name, []).append(index)

    replaced: dict[int, list[bytes]] = {}  # node index -> the nodes standing in its place
    dropped_nodes: set[int] = set()
    new_inits: list[bytes] = []
    removed_names: set[str] = set()
    for index, cast in enumerate(nodes):
        plan = _match(cast, nodes, inits, consumers, uses, pinned)
        if plan is None:
            continue
        if any(u in replaced for u in consumers[nodes[plan[1]].outputs[0]]):
            continue  # a node fed by two patterns: leave the second alone
        weight_name, mul_index, scale_name, weight, scale = plan
        mul = nodes[mul_index]
        users = consumers[mul.outputs[0]]
        if matmuls and all(nodes[u].op == "MatMul" for u in users):
            stand_ins = _as_matmul_nbits(
                weight_name,
                weight,
                scale_name,
                scale,
                block_size,
                accuracy_level,
                mul.outputs[0],
                [nodes[u] for u in users],
            )
            if stand_ins is None:
                continue
            tensors, products = stand_ins
            new_inits += tensors
            for u, new in zip(users, products, strict=True):
                replaced[u] = [new]
            if uses[weight_name] == 1:
                removed_names.add(weight_name)
            if uses[scale_name] == 1:
                removed_names.add(scale_name)
        elif all(nodes[u].op == "Gather" for u in users):
            gathers = _as_int8_gather(weight_name, scale_name, scale, [nodes[u] for u in users])
            if gathers is None:
                continue
            for u, new_nodes in zip(users, gathers, strict=True):
                replaced[u] = new_nodes
        else:
            continue
        dropped_nodes.update((index, mul_index))
        removed_names.update((cast.outputs[0], mul.outputs[0]))

    if not replaced:
        return None
    out_graph = _graph_out(graph, dropped_nodes, replaced, removed_names, new_inits)
    return _model_out(top, out_graph)


def _graph_out(
    graph: list[Field],
    dropped_nodes: set[int],
    replaced: dict[int, list[bytes]],
    removed_names: set[str],
    new_inits: list[bytes],
) -> list[Field]:
    """The graph's fields with the matched nodes replaced and what they alone used removed."""
    out_graph: list[Field] = []
    node_index = 0
    for number, wire, value in graph:
        if number == _GRAPH_NODE:
            i, node_index = node_index, node_index + 1
            if i in dropped_nodes:
                continue
            if i in replaced:
                out_graph += [(_GRAPH_NODE, _BYTES, raw) for raw in replaced[i]]
                continue
        elif number == _GRAPH_INITIALIZER:
            if _tensor_name(_view(value)) in removed_names:
                continue
        elif number == _GRAPH_VALUE_INFO:
            names = {_text(v) for n, _w, v in _fields(_view(value)) if n == _VI_NAME}
            if names & removed_names:
                continue
        out_graph.append((number, wire, value))
    out_graph += [(_GRAPH_INITIALIZER, _BYTES, raw) for raw in new_inits]
    return out_graph


def _model_out(top: list[Field], out_graph: list[Field]) -> bytes:
    """The model with its new graph, declaring the com.microsoft opset the new nodes need."""
    out_model: list[Field] = []
    has_ms = False
    for number, wire, value in top:
        if number == _MODEL_GRAPH:
            value = _encode(out_graph)
        elif number == _MODEL_OPSET:
            has_ms |= any(
                n == _OPSET_DOMAIN and _text(v) == _MS_DOMAIN for n, _w, v in _fields(_view(value))
            )
        out_model.append((number, wire, value))
    if not has_ms:
        opset = _encode(
            [(_OPSET_DOMAIN, _BYTES, _MS_DOMAIN.encode()), (_OPSET_VERSION, _VARINT, 1)]
        )
        out_model.append((_MODEL_OPSET, _BYTES, opset))
    return _encode(out_model)


def _match(
    cast: _Node,
    nodes: list[_Node],
    inits: dict[str, memoryview],
    consumers: dict[str, list[int]],
    uses: Counter[str],
    pinned: set[str],
) -> tuple[str, int, str, np.ndarray, np.ndarray] | None:
    """``Cast(int8 initialiser) -> Mul(scale initialiser)``, both used only by each other."""
    if cast.op != "Cast" or cast.domain or len(cast.inputs) != 1 or cast.ints.get("to") != _FLOAT:
        return None
    weight_name, widened = cast.inputs[0], cast.outputs[0]
    if weight_name not in inits or weight_name in pinned or widened in pinned:
        return None
    users = consumers.get(widened, [])
    if len(users) != 1 or uses[widened] != 1:
        return None
    mul_index = users[0]
    mul = nodes[mul_index]
    if mul.op != "Mul" or mul.domain or len(mul.inputs) != 2 or mul.outputs[0] in pinned:
        return None
    scale_name = mul.inputs[1] if mul.inputs[0] == widened else mul.inputs[0]
    if scale_name not in inits or scale_name in pinned:
        return None
    weight, scale = _tensor(inits[weight_name]), _tensor(inits[scale_name])
    if weight is None or scale is None or weight.dtype != np.int8 or scale.dtype != np.float32:
        return None
    if weight.ndim != 2:
        return None
    return weight_name, mul_index, scale_name, weight, scale


def _as_matmul_nbits(
    weight_name: str,
    weight: np.ndarray,
    scale_name: str,
    scale: np.ndarray,
    block_size: int,
    accuracy_level: int,
    dequantised: str,
    matmuls: list[_Node],
) -> tuple[list[bytes], list[bytes]] | None:
    """``MatMulNBits`` nodes for ``x @ (weight * scale)``, scale one per output column."""
    k, n = weight.shape
    if scale.shape not in ((1, n), (n,)):
        return None
    for node in matmuls:
        if node.domain or len(node.inputs) != 2 or node.other_attrs or node.ints:
            return None
    blocks = -(-k // block_size)
    # int8 + 128 as uint8 is a flip of the sign bit; MatMulNBits' default 8-bit zero point
    # is 128, so the dequantised weights are exactly the original ones.
    unsigned = (weight.view(np.uint8) ^ 0x80).T
    padded = np.full((n, blocks * block_size), 0x80, dtype=np.uint8)
    padded[:, :k] = unsigned
    packed_name, scales_name = f"{weight_name}__u8", f"{scale_name}__blocks"
    tensors = [
        _new_tensor(packed_name, padded.reshape(n, blocks, block_size), _UINT8),
        _new_tensor(scales_name, np.repeat(scale.reshape(n), blocks).astype(np.float32), _FLOAT),
    ]
    nodes = [
        _new_node(
            "MatMulNBits",
            [node.inputs[0], packed_name, scales_name],
            node.outputs,
            f"{node.outputs[0]}__nbits",
            domain=_MS_DOMAIN,
            K=k,
            N=n,
            bits=8,
            block_size=block_size,
            accuracy_level=accuracy_level,
        )
        for node in matmuls
        if node.inputs[1] == dequantised and node.inputs[0] != dequantised
    ]
    if len(nodes) != len(matmuls):
        return None
    return tensors, nodes


def _as_int8_gather(
    weight_name: str, scale_name: str, scale: np.ndarray, gathers: list[_Node]
) -> list[list[bytes]] | None:
    """For each ``Gather(table, ids)``: gather the int8 rows and their scales, then widen."""
    per_row = scale.ndim == 2 and scale.shape[1] == 1
    if not per_row and scale.size != 1:
        return None
    out = []
    for node in gathers:
        if node.domain or len(node.inputs) != 2 or node.other_attrs:
            return None
        if node.ints.get("axis", 0) != 0 or node.inputs[1] == node.inputs[0]:
            return None
        ids, result = node.inputs[1], node.outputs[0]
        rows, widened, scales = f"{result}__i8", f"{result}__f32", f"{result}__scale"
        steps = [
            _new_node("Gather", [weight_name, ids], [rows], rows),
            _new_node("Cast", [rows], [widened], widened, to=_FLOAT),
        ]
        if per_row:
            steps.append(_new_node("Gather", [scale_name, ids], [scales], scales))
            steps.append(_new_node("Mul", [widened, scales], [result], result))
        else:
            steps.append(_new_node("Mul", [widened, scale_name], [result], result))
        out.append(steps)
    return out
