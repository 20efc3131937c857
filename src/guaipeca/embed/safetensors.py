"""Read and write the safetensors file format with numpy alone.

The format (https://huggingface.co/docs/safetensors) is an 8-byte little-endian header length,
a JSON header mapping each tensor name to its dtype, shape and byte range, then the raw
little-endian data. That is all a model2vec folder needs, so the ``safetensors`` package (and
the torch-shaped API around it) is not a dependency. Tensors are read memory-mapped: a large
embedding table costs resident memory only for the rows a text actually touches.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import numpy.typing as npt

from guaipeca.errors import ModelError

__all__ = ["read_safetensors", "write_safetensors"]

# The dtypes numpy can represent (BF16 and the 8-bit floats cannot be, and no model2vec
# folder uses them).
_DTYPES: dict[str, str] = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "BOOL": "?",
}
_NAMES = {np.dtype(v).str: k for k, v in _DTYPES.items()}
# A header is a few hundred bytes per tensor; anything near this is not a safetensors file.
_MAX_HEADER = 100 * 1024 * 1024


def read_safetensors(path: str | Path) -> dict[str, npt.NDArray[np.generic]]:
    """Every tensor of a safetensors file, as read-only arrays mapped from the file.

    Raises:
        ModelError: the file is missing, truncated, or not a safetensors file.
    """
    file = Path(path)
    try:
        size = file.stat().st_size
        with open(file, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise ModelError(f"{file} is not a safetensors file (shorter than 8 bytes)")
            (length,) = struct.unpack("<Q", head)
            if length > min(size - 8, _MAX_HEADER):
                raise ModelError(f"{file} is not a safetensors file (header length {length})")
            header = json.loads(fh.read(length))
    except FileNotFoundError:
        raise ModelError(f"model file not found: {file}") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ModelError(f"{file} is not a safetensors file (its header is not JSON)") from None
    except OSError as exc:
        raise ModelError(f"cannot read {file}: {exc.strerror or exc}") from None
    if not isinstance(header, dict):
        raise ModelError(f"{file} is not a safetensors file (its header is not an object)")
    start = 8 + length
    tensors: dict[str, npt.NDArray[np.generic]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        tensors[name] = _tensor(file, name, info, start, size)
    return tensors


def _tensor(file: Path, name: str, info: object, start: int, size: int) -> npt.NDArray[np.generic]:
    try:
        dtype = np.dtype(_DTYPES[info["dtype"]])  # type: ignore[index]
        shape = tuple(int(n) for n in info["shape"])  # type: ignore[index]
        begin, end = (int(n) for n in info["data_offsets"])  # type: ignore[index]
    except KeyError as exc:
        raise ModelError(f"{file}: tensor {name!r} has an unsupported or missing {exc}") from None
    except (TypeError, ValueError):
        raise ModelError(f"{file}: tensor {name!r} has a malformed header entry") from None
    count = int(np.prod(shape, dtype=np.int64))
    if end - begin != count * dtype.itemsize or begin < 0 or start + end > size:
        raise ModelError(f"{file}: tensor {name!r} does not fit its byte range (truncated file?)")
    if count == 0:
        return np.zeros(shape, dtype=dtype)
    return np.memmap(file, dtype=dtype, mode="r", offset=start + begin, shape=shape)


def write_safetensors(
    path: str | Path,
    tensors: Mapping[str, npt.NDArray[np.generic]],
    metadata: Mapping[str, str] | None = None,
) -> None:
    """Write ``tensors`` (C order, little-endian) to ``path`` atomically (temp + rename).

    Raises:
        ModelError: a tensor's dtype has no safetensors name.
    """
    header: dict[str, object] = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    arrays: list[npt.NDArray[np.generic]] = []
    offset = 0
    for name, tensor in tensors.items():
        array = np.ascontiguousarray(tensor, dtype=np.asarray(tensor).dtype.newbyteorder("<"))
        dtype = _NAMES.get(array.dtype.str)
        if dtype is None:
            raise ModelError(f"tensor {name!r}: dtype {array.dtype} has no safetensors name")
        header[name] = {
            "dtype": dtype,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + array.nbytes],
        }
        offset += array.nbytes
        arrays.append(array)
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # data starts 8-byte aligned, as the reference writer does
    target = Path(path)
    temporary = target.with_name(target.name + ".tmp")
    with open(temporary, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        for array in arrays:
            fh.write(array.tobytes())
        fh.flush()
        os.fsync(fh.fileno())
    temporary.replace(target)
