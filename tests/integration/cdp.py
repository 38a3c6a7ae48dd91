"""A headless Chromium driven over the DevTools protocol, for the live page's test
(test_ui.py): Debian's chromium, started with a DevTools port of its own, and a WebSocket
client (Debian's python3-websocket) speaking the protocol's JSON messages.

Chromium is started by the test and stopped by its PID. Its flags keep it from reaching
for the network on its own (this machine's network is closed: without them its background
connections are refused and logged), and from touching the user's profile.

    with Browser() as b:
        page = b.new_page()                  # a tab, attached in flat mode
        page.basic_auth("user", "secret")    # answers the page's Basic challenges
        page.navigate("http://127.0.0.1:7380/ui")
        page.eval("document.title")
        page.screenshot("out.png", width=1280)
"""

import base64
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import websocket

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--hide-scrollbars",
         "--mute-audio", "--remote-debugging-port=0", "--remote-allow-origins=*"]


class CDPError(Exception):
    pass


class Browser:
    """One Chromium process and its DevTools connection (the browser target's)."""

    def __init__(self, timeout=20.0):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="sluice-chromium-")
        self.stderr_path = os.path.join(self.profile, "chromium.stderr")
        self.proc = None
        self.ws = None
        self.next_id = 0
        self.lock = threading.Lock()
        self.pending = {}        # id -> queue of the reply
        self.handlers = {}       # (session, method) -> callable(params)
        self.events = queue.Queue()
        self.reader = None

    # -- life
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        if not os.access(CHROMIUM, os.X_OK):
            raise CDPError("chromium is not installed (scripts/deps.sh installs it)")
        err = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen([CHROMIUM] + FLAGS + ["--user-data-dir=" + self.profile,
                                                           "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        err.close()
        deadline = time.monotonic() + self.timeout
        url = None
        while url is None:
            if self.proc.poll() is not None:
                raise CDPError("chromium exited %s: %s" % (self.proc.returncode, self.stderr()))
            if time.monotonic() > deadline:
                raise CDPError("chromium gave no DevTools address: %s" % self.stderr())
            m = re.search(r"DevTools listening on (ws://\S+)", self.stderr())
            if m:
                url = m.group(1)
            else:
                time.sleep(0.05)
        self.ws = websocket.create_connection(url, timeout=self.timeout, suppress_origin=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self):
        if self.ws is not None:
            try:
                self.send("Browser.close", timeout=5)
            except Exception:  # already gone: stopped by its PID below
                pass
            self.ws.close()
            self.ws = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
            self.proc = None
        shutil.rmtree(self.profile, ignore_errors=True)

    # -- the protocol
    def _read(self):
        while True:
            try:
                msg = json.loads(self.ws.recv())
            except Exception:  # the connection closed: every waiter gets an error
                with self.lock:
                    for q in self.pending.values():
                        q.put({"error": {"message": "DevTools connection closed"}})
                    self.pending.clear()
                return
            if "id" in msg:
                with self.lock:
                    q = self.pending.pop(msg["id"], None)
                if q is not None:
                    q.put(msg)
                continue
            h = self.handlers.get((msg.get("sessionId"), msg.get("method")))
            if h is not None:
                # Answered on a thread of its own: a handler sends commands, whose
                # replies this reader must be free to read.
                threading.Thread(target=h, args=(msg.get("params", {}),), daemon=True).start()
            else:
                self.events.put(msg)

    def send(self, method, params=None, session=None, timeout=None):
        with self.lock:
            self.next_id += 1
            mid = self.next_id
            q = queue.Queue()
            self.pending[mid] = q
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        try:
            reply = q.get(timeout=timeout or self.timeout)
        except queue.Empty:
            raise CDPError("%s: no answer within %ss" % (method, timeout or self.timeout))
        if "error" in reply:
            raise CDPError("%s: %s" % (method, reply["error"].get("message")))
        return reply.get("result", {})

    def new_page(self):
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})
        return Page(self, session["sessionId"])


class Page:
    """A tab, through its flat-mode session."""

    def __init__(self, browser, session):
        self.b = browser
        self.session = session
        self.send("Page.enable")
        self.send("Runtime.enable")

    def send(self, method, params=None, timeout=None):
        return self.b.send(method, params, session=self.session, timeout=timeout)

    def basic_auth(self, user, password):
        """Answers every HTTP authentication challenge of the page with these credentials,
        as a person typing them into the browser's dialog would (Fetch domain); every
        other request goes on untouched."""
        def paused(p):
            self.send("Fetch.continueRequest", {"requestId": p["requestId"]})

        def auth(p):
            self.send("Fetch.continueWithAuth", {
                "requestId": p["requestId"],
                "authChallengeResponse": {"response": "ProvideCredentials",
                                          "username": user, "password": password}})
        self.b.handlers[(self.session, "Fetch.requestPaused")] = paused
        self.b.handlers[(self.session, "Fetch.authRequired")] = auth
        self.send("Fetch.enable", {"handleAuthRequests": True,
                                   "patterns": [{"urlPattern": "*"}]})

    def navigate(self, url):
        r = self.send("Page.navigate", {"url": url})
        if r.get("errorText"):
            raise CDPError("navigate %s: %s" % (url, r["errorText"]))
        self.wait_for("document.readyState === 'complete'")

    def eval(self, expr, timeout=None):
        """The value of a JavaScript expression (awaited when it is a promise), as JSON."""
        r = self.send("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": True}, timeout=timeout)
        if "exceptionDetails" in r:
            raise CDPError("%s: %s" % (expr, r["exceptionDetails"].get("exception", {})
                                       .get("description", r["exceptionDetails"])))
        return r["result"].get("value")

    def wait_for(self, expr, timeout=10.0, what=None):
        """Polls a JavaScript condition until it is true; fails after timeout seconds (a
        bound on a test that would otherwise hang, not a measurement)."""
        deadline = time.monotonic() + timeout
        while True:
            v = self.eval(expr)
            if v:
                return v
            if time.monotonic() > deadline:
                raise CDPError("not true within %ss: %s" % (timeout, what or expr))
            time.sleep(0.05)

    def screenshot(self, path, width, mobile=False, scale=1):
        """The whole page at a viewport `width` CSS pixels wide, as a PNG file."""
        self.send("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": 800, "deviceScaleFactor": scale, "mobile": mobile})
        # Let the layout settle at the new width, then size the viewport to the page.
        height = self.eval("new Promise(r => requestAnimationFrame(() => requestAnimationFrame("
                           "() => r(Math.ceil(document.documentElement.scrollHeight)))))")
        self.send("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": scale, "mobile": mobile})
        self.eval("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        png = self.send("Page.captureScreenshot", {"format": "png"}, timeout=30)["data"]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(png))
        return path
