"""The AWS emulator's test companions: a stub model server that records what ``InvokeEndpoint``
forwards, and a one-line deploy on the emulator."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from pt2aws.aws import hosting

NOTHING = {"endpoints": [], "endpoint_configs": [], "models": [], "scalable_targets": []}


class StubModelServer:
    """``POST /invocations``: ``{"inputs": [...]}`` -> ``[{"label": text, "score": 1.0}, ...]``.

    Records every request; answers 415 for anything but JSON, like the real handler.
    """

    def __init__(self):
        self.requests: list[tuple[str, bytes]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                stub.requests.append((self.headers["Content-Type"], body))
                if self.headers["Content-Type"] != "application/json":
                    self.send_response(415)
                    self.end_headers()
                    self.wfile.write(b"content type not supported; send application/json")
                    return
                texts = json.loads(body.decode("utf-8"))["inputs"]
                answer = json.dumps([{"label": t, "score": 1.0} for t in texts]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/invocations"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def deploy_on_emulator(emulator, model_url, name, **kwargs):
    return hosting.deployed_endpoint(emulator.session(), model_url, name=name, **kwargs)
