"""A loopback stand-in for an OpenAI-compatible chat completions endpoint, for tests (no
network exists here), so the real `openai` client runs against it unchanged:

    POST /v1/chat/completions  {model, messages, temperature}
        -> {"id", "object": "chat.completion", "created", "model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens", "completion_tokens", "total_tokens"}}

The answer is a JSON object {"context", "questions"} written from the chunk it was sent (the
number of questions the prompt asks for). `faults` is a list of behaviours taken one per
request (the last one repeats; "ok" answers normally): "slow" (waits `delay` seconds, past
the client's timeout), "429", "500", "malformed" (not JSON), "too_many" (8 questions),
"too_few" (1), "empty" (empty content), "fenced" (the JSON inside a markdown fence with a
sentence around it), "long" (a 300-word context). Every request is recorded.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHARS_PER_TOKEN = 4


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.loads(raw or b"{}")
        owner: ChatServer = self.server.owner
        fault = owner.take(body)
        if self.path != "/v1/chat/completions":
            return self._send(404, {"error": {"message": "no such endpoint"}})
        if fault == "slow":
            owner.release.wait(owner.delay)
            fault = "ok"
        if fault in ("429", "500"):
            return self._send(int(fault), {"error": {"message": "rate limited" if fault == "429" else "boom",
                                                     "type": "server_error"}})
        messages = body.get("messages", [])
        prompt = "\n".join(m.get("content", "") for m in messages)
        chunk = re.search(r"<chunk>\n(.*?)\n</chunk>", prompt, re.S)
        asked = re.search(r"exactly (\d+) questions", prompt)
        n = int(asked.group(1)) if asked else 0
        text = chunk.group(1) if chunk else ""
        words = text.split()
        context = f"This chunk comes from a company page and covers {' '.join(words[:6])}."
        questions = [f"What does the handbook say about {w.strip('.,')}?" for w in (words * 5)[:n]]
        if fault == "too_many":
            questions = [f"Question {i} about {words[0] if words else 'it'}?" for i in range(8)]
        elif fault == "too_few":
            questions = questions[:1]
        elif fault == "long":
            context = " ".join(["word"] * 300)
        content = json.dumps({"context": context if "the context" in prompt else None, "questions": questions})
        if fault == "malformed":
            content = "Sure! Here is the context: it is about refunds"
        elif fault == "empty":
            content = ""
        elif fault == "fenced":
            content = f"Here you go:\n```json\n{content}\n```\nHope it helps."
        usage = {"prompt_tokens": len(prompt) // CHARS_PER_TOKEN + 1, "completion_tokens": len(content) // 4 + 1}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return self._send(200, {"id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                                "model": body.get("model"),
                                "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                             "finish_reason": "stop"}],
                                "usage": usage})

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class ChatServer:
    def __init__(self, faults: list[str] | None = None, delay: float = 5.0) -> None:
        self.faults = list(faults or ["ok"])
        self.delay = delay
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.owner = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def take(self, body: dict[str, Any]) -> str:
        with self._lock:
            self.requests.append(body)
            return self.faults.pop(0) if len(self.faults) > 1 else self.faults[0]

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
