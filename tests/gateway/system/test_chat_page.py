"""The chat page in a real headless Chromium driven by Playwright (the one `make test-tools` unpacks from the npm
registry into .cache/tools, else Debian's chromium): upload, ask, watch the answer stream, see the source and the
time each stage took."""

from __future__ import annotations

import re
from contextlib import contextmanager

import pytest

from tests.conftest import gateway_env
from tests.gateway.facts import grounded
from tests.support.browser import chromium
from tests.support.loopback_http import LoopbackHTTP, QuietHandler
from tests.support.servers import RemoteServer


@pytest.fixture(scope="module")
def browser():
    with chromium() as browser:
        yield browser


def test_upload_ask_stream_and_sources(browser, embedding_service, llm_service, tmp_path):
    document = tmp_path / "festival.txt"
    document.write_text("The mascot of the Zorblat festival is a purple heron named Fitch.\n")
    env = gateway_env(embedding_service.url, llm_service.url, tmp_path / "data")
    with RemoteServer("ovgenai_services.gateway", env=env) as gateway:
        page = browser.new_page()
        outside_requests = []
        page.on("request", lambda r: None if r.url.startswith(gateway.url) else outside_requests.append(r.url))
        # Anything the page's content security policy blocks is reported here (and on the console).
        page.add_init_script("""window.cspViolations = [];
            document.addEventListener('securitypolicyviolation', (e) => window.cspViolations.push(e.violatedDirective));
        """)
        console = []
        page.on("console", lambda message: console.append(message.text))
        loaded = page.goto(gateway.url + "/")
        for name, value in (("content-security-policy", "default-src 'self'"), ("x-content-type-options", "nosniff"),
                            ("referrer-policy", "no-referrer"), ("x-frame-options", "DENY")):
            assert value in loaded.headers[name]
        page.wait_for_selector("#health.ok")
        page.set_input_files("#file-input", str(document))
        page.click("#upload-button")
        page.wait_for_selector("#documents li:has-text('festival.txt')")
        assert "ingested" in page.text_content("#upload-status")

        # Count how often the answer's text grows: a streamed answer grows chunk by chunk, not once.
        page.evaluate("""() => {
            window.answerUpdates = 0;
            new MutationObserver((records) => {
                for (const r of records) if (r.type === 'characterData' || r.target.closest?.('.assistant'))
                    window.answerUpdates++;
            }).observe(document.getElementById('messages'), {subtree: true, characterData: true, childList: true});
        }""")
        page.fill("#question", "What is the name of the Zorblat festival mascot?")
        page.click("#ask-button")
        answer = page.locator(".message.assistant").last
        page.wait_for_selector(".message.assistant.done", timeout=120_000)
        assert page.evaluate("window.answerUpdates") > 3
        text = answer.locator(".content").text_content()  # the streamed text, without the sources box
        assert grounded(text, document.read_text(), "What is the name of the Zorblat festival mascot?"), text
        assert "festival.txt" in answer.locator(".sources").text_content()
        # Each stage's time beside the answer; no reranker is configured, so that stage shows none.
        for stage, label in (("embed", "embed"), ("retrieve", "retrieve"), ("llm_first_token", "first token"),
                             ("total", "total")):
            shown = answer.locator(f".timings [data-stage={stage}]").text_content()
            assert re.fullmatch(rf"{label} \d+(\.\d+)? m?s", shown), shown
        assert answer.locator(".timings [data-stage=rerank]").text_content() == "rerank –"
        assert "error" not in (answer.get_attribute("class") or "")
        page.screenshot(path=str(tmp_path / "chat.png"))
        assert outside_requests == []
        assert page.evaluate("window.cspViolations") == []
        assert not [line for line in console if "Content Security Policy" in line], console


def test_the_page_asks_for_the_api_key_once_and_uses_it(browser, embedding_service, llm_service, tmp_path):
    env = {**gateway_env(embedding_service.url, llm_service.url, tmp_path / "data"), "SERVICE_API_KEY": "s3cret"}
    with RemoteServer("ovgenai_services.gateway", env=env) as gateway:
        page = browser.new_page()
        prompts = []
        page.on("dialog", lambda dialog: (prompts.append(dialog.message), dialog.accept("s3cret")))
        page.goto(gateway.url + "/")
        page.wait_for_selector("#health.ok")
        document = tmp_path / "key.txt"
        document.write_text("The key opens the door.\n")
        page.set_input_files("#file-input", str(document))
        page.click("#upload-button")
        page.wait_for_selector("#documents li:has-text('key.txt')")
        assert prompts == ["This gateway needs its API key:"]  # asked once, then remembered


class _UIPage(QuietHandler):
    """A page of another web app (e.g. OPEA's chat UI on its own port): an empty document to run fetch() from."""

    def do_GET(self):  # noqa: N802 - http.server's name
        body = b"<!doctype html><title>another app</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def ui_origin():
    """A web page served from a second loopback port: another origin than the gateway's."""
    with LoopbackHTTP(_UIPage) as server:
        yield server.url


ASK_FROM_THE_PAGE = """async ([url, key]) => {
    try {
        const response = await fetch(url + '/v1/chatqna', {method: 'POST', headers: {
            'Content-Type': 'application/json', 'Authorization': 'Bearer ' + key},
            body: JSON.stringify({messages: 'What is OpenVINO?', max_tokens: 4, stream: false})});
        return {status: response.status, body: await response.json()};
    } catch (error) {
        return {blocked: String(error)};
    }
}"""


def test_a_page_on_an_allowed_origin_calls_the_gateway_and_others_are_blocked(browser, embedding_service,
                                                                               llm_service, tmp_path):
    """ALLOWED_ORIGINS (CORS): a page of another app, on an origin the gateway lists, asks a question with the key
    and reads the answer; the same call from a page on an origin it does not list is blocked by the browser."""
    with ui_origin() as allowed, ui_origin() as other:
        env = {**gateway_env(embedding_service.url, llm_service.url, tmp_path / "data"), "SERVICE_API_KEY": "s3cret",
               "ALLOWED_ORIGINS": allowed}
        with RemoteServer("ovgenai_services.gateway", env=env) as gateway:
            page = browser.new_page()
            page.goto(allowed + "/")
            answer = page.evaluate(ASK_FROM_THE_PAGE, [gateway.url, "s3cret"])
            assert answer.get("status") == 200, answer
            assert answer["body"]["choices"][0]["message"]["content"] is not None
            page.goto(other + "/")
            blocked = page.evaluate(ASK_FROM_THE_PAGE, [gateway.url, "s3cret"])
            assert "Failed to fetch" in blocked.get("blocked", ""), blocked
