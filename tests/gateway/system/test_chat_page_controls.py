"""The chat page's controls in a real headless Chromium (tests/support/browser.py), the gateway in front of an
OpenAI-compatible stand-in for the LLM (tests/support/fake_openai.py) so that each answer is known: an answer is
rendered as Markdown and nothing in it runs (`<img onerror>`, `javascript:` links), any address renders as a safe link,
Stop ends a streaming answer and keeps what came, so does an error mid-stream, "Delete all" asks first, and the page
works on the index it picks."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from tests.conftest import gateway_env
from tests.support.browser import chromium
from tests.support.fake_openai import LINK_ITEMS
from tests.support.servers import ROOT, RemoteServer, free_port, wait_until


@pytest.fixture(scope="module")
def browser():
    with chromium() as browser:
        yield browser


@pytest.fixture(scope="module")
def fake_llm():
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "tests.support.fake_openai", str(port)], cwd=ROOT)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(url + "/v1/models").status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, 30, message="the stand-in LLM")
        yield url
    finally:
        process.terminate()
        process.wait(10)


def gateway(embedding_service, fake_llm, tmp_path, model: str) -> RemoteServer:
    return RemoteServer("ovgenai_services.gateway", env=gateway_env(embedding_service.url, fake_llm, tmp_path / "data",
                                                                  LLM_MODEL_ID=model))


def ask(page, question: str) -> None:
    page.fill("#question", question)
    page.click("#ask-button")


def test_an_answer_is_rendered_as_markdown_and_nothing_in_it_runs(browser, embedding_service, fake_llm, tmp_path):
    with gateway(embedding_service, fake_llm, tmp_path, "markdown") as server:
        page = browser.new_page()
        dialogs = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.goto(server.url + "/")
        ask(page, "How do I start?")
        page.wait_for_selector(".message.assistant.done", timeout=60_000)
        answer = page.locator(".message.assistant .content").last
        assert answer.locator("h4").text_content() == "Steps"
        assert answer.locator("ol li").all_text_contents() == ["Install OpenVINO", "Run make run"]
        assert answer.locator("ol li strong").text_content() == "OpenVINO"
        assert answer.locator("ol li code").text_content() == "make run"
        assert answer.locator("pre code").text_content() == 'print("<b>not bold</b>")'
        assert answer.locator("em").text_content() == "done"
        # The HTML and the script are text, never elements or code that runs.
        text = answer.text_content()
        assert '<img src=x onerror="window.injected = 1">' in text and "[click me](javascript:" in text
        assert page.locator("#messages img, #messages b, #messages script").count() == 0
        links = answer.locator("a")
        assert links.count() == 1 and links.get_attribute("href") == "https://example.com/docs"
        assert links.get_attribute("rel") == "noopener noreferrer nofollow"
        page.wait_for_timeout(300)  # an error handler would have run by now
        assert page.evaluate("window.injected") is None and dialogs == []
        # The renderer alone, on what an answer may hold: still no element but the ones it makes.
        made = page.evaluate("""() => {
            const box = document.createElement('div');
            box.append(renderMarkdown('<script>window.injected = 3</script> [x](JaVaScRiPt:alert(1)) ' +
                                      '[y](data:text/html,hi) **<svg onload=alert(1)>** `<i>`'));
            return [box.innerHTML, box.querySelectorAll('*').length];
        }""")
        assert made[1] == 3 and "&lt;script&gt;" in made[0] and "href" not in made[0], made  # p, strong, code


# The renderer alone (markdown.js): each link's text and href, and how many links lie inside another.
RENDERED = """(text) => {
    const box = document.createElement('div');
    box.append(renderMarkdown(text));
    return {text: box.textContent, nested: box.querySelectorAll('a a').length,
            links: [...box.querySelectorAll('a')].map((a) => [a.textContent, a.getAttribute('href')])};
}"""
A, B = "https://a.example/x", "https://b.example/y"
ADDRESSES = [  # what an answer holds, the links it renders as
    (f"see {A}.", [[A, A]]),
    (f"[{A}]({A})", [[A, A]]),
    (f"[{A}]({B})", [[A, B]]),
    (f"[**{A}** and _{B}_]({B})", [[f"{A} and {B}", B]]),
    (f"[{A}](javascript:alert) [{A}](data:text/html,x)", []),  # text as written: no link, not even to A
    (f"[mail {A}](mailto:team@example.com)", [[f"mail {A}", "mailto:team@example.com"]]),
    (f"<{A}> ({B}) {A}/a_b_c?d=*e*", [[A, A], [B, B], [f"{A}/a_b_c?d=*e*", f"{A}/a_b_c?d=*e*"]]),
]


def test_an_answer_full_of_addresses_renders_each_as_a_safe_link(browser, embedding_service, fake_llm, tmp_path):
    """A link's label was rendered with links in it, and a bare address is its own label: it became a link inside
    the link, again and again, until the stack overflowed; the answer was lost and the question dropped."""
    with gateway(embedding_service, fake_llm, tmp_path, "links") as server:
        page = browser.new_page()
        faults = []
        page.on("pageerror", lambda error: faults.append(str(error)))
        page.on("console", lambda message: faults.append(message.text) if message.type == "error" else None)
        page.goto(server.url + "/")
        ask(page, "Where can I read more?")
        page.wait_for_selector(".message.assistant.done", timeout=60_000)
        answer = page.locator(".message.assistant").last
        assert "error" not in answer.get_attribute("class") and faults == []
        links = answer.locator(".content a")
        hrefs = links.evaluate_all("links => links.map((a) => a.getAttribute('href'))")
        genai = "https://github.com/openvinotoolkit/openvino.genai"
        assert hrefs[:6] == ["https://docs.openvino.ai/2025/index.html", genai, "https://example.com/bold",
                             "https://example.com/angle", "https://example.com/paren", "mailto:team@example.com"]
        assert hrefs[6:] == [href for i in range(LINK_ITEMS)
                             for href in (f"https://example.com/page/{i}?q=a_b&r=*c*", f"https://example.org/{i}")]
        assert answer.locator(f".content a[href='{genai}']").text_content() == genai
        assert answer.locator(".content a a").count() == 0
        assert "[https://evil.example](javascript:alert)" in answer.locator(".content").text_content()
        assert page.evaluate("history.map((m) => m.role)") == ["user", "assistant"]  # the question is kept

        for text, expected in ADDRESSES:
            made = page.evaluate(RENDERED, text)
            assert made["links"] == expected and made["nested"] == 0, (text, made)
        assert page.evaluate(RENDERED, ADDRESSES[4][0])["text"] == ADDRESSES[4][0]
        lines = [f"{i}. {A}/{i} [{B}/{i}]({B}/{i}) [*{A}/{i}*]({A}/{i})" for i in range(1, 3001)]
        made = page.evaluate(RENDERED, "\n".join(lines))
        assert len(made["links"]) == 3 * len(lines) and made["nested"] == 0
        assert faults == []


def test_an_error_mid_stream_keeps_the_answer_so_far(browser, embedding_service, fake_llm, tmp_path):
    """The `cut` stand-in sends the question's first word, then drops its connection: the gateway ends the stream
    with an error event, and the page shows the error beneath the text that came, which the conversation keeps."""
    with gateway(embedding_service, fake_llm, tmp_path, "cut") as server:
        page = browser.new_page()
        page.goto(server.url + "/")
        ask(page, "Herons nest in colonies.")
        page.wait_for_selector(".message.assistant.error.done", timeout=60_000)
        answer = page.locator(".message.assistant").last
        assert answer.locator(".content").text_content() == "Herons"
        assert answer.locator(".note").text_content().startswith("Error: ")
        assert page.evaluate("history") == [{"role": "user", "content": "Herons nest in colonies."},
                                            {"role": "assistant", "content": "Herons"}]
        assert page.is_enabled("#ask-button") and not page.is_visible("#stop-button")


def test_stop_ends_a_streaming_answer_and_keeps_what_came(browser, embedding_service, fake_llm, tmp_path):
    with gateway(embedding_service, fake_llm, tmp_path, "trickle") as server:
        page = browser.new_page()
        page.goto(server.url + "/")
        assert not page.is_visible("#stop-button")
        ask(page, "Tell me everything.")
        page.wait_for_selector(".message.assistant.streaming .content:has-text('word3')", timeout=60_000)
        assert page.is_visible("#stop-button") and page.is_disabled("#ask-button")
        page.click("#stop-button")
        page.wait_for_selector(".message.assistant.stopped.done")
        kept = page.locator(".message.assistant .content").last.text_content()
        assert kept.startswith("word0 word1 word2 word3")
        page.wait_for_timeout(500)
        assert page.locator(".message.assistant .content").last.text_content() == kept  # nothing more arrives
        assert not page.is_visible("#stop-button") and page.is_enabled("#ask-button")
        assert "stopped" in page.locator(".message.assistant .note").last.text_content()


def test_delete_all_asks_first(browser, embedding_service, fake_llm, tmp_path):
    document = tmp_path / "keep.txt"
    document.write_text("Herons nest in colonies.\n")
    with gateway(embedding_service, fake_llm, tmp_path, "echo") as server:
        page = browser.new_page()
        answers = iter([False, True])
        asked = []

        def on_dialog(dialog):
            asked.append(dialog.message)
            dialog.accept() if next(answers) else dialog.dismiss()

        page.on("dialog", on_dialog)
        page.goto(server.url + "/")
        page.set_input_files("#file-input", str(document))
        page.click("#upload-button")
        page.wait_for_selector("#documents li:has-text('keep.txt')")
        page.click("#delete-all")  # dismissed: nothing is deleted
        page.wait_for_timeout(500)
        assert page.locator("#documents li").count() == 1
        page.click("#delete-all")  # accepted
        page.wait_for_selector("#documents li", state="detached")
        assert asked == ["Delete the 1 document of the index 'chatqna'? This cannot be undone."] * 2


def test_the_page_works_on_the_index_it_picks(browser, embedding_service, fake_llm, tmp_path):
    """A new index named on the page is made by its first upload; the list, the answers' sources and "Delete all"
    are the picked index's, and deleting all of a new index's documents drops it and goes back to the default."""
    herons, kilns = tmp_path / "herons.txt", tmp_path / "kilns.txt"
    herons.write_text("Herons nest in colonies near water.\n")
    kilns.write_text("A kiln fires clay at over a thousand degrees.\n")
    with gateway(embedding_service, fake_llm, tmp_path, "echo") as server:
        page = browser.new_page()
        page.on("dialog", lambda dialog: dialog.accept("pottery") if dialog.type == "prompt" else dialog.accept())
        page.goto(server.url + "/")
        page.wait_for_selector("#index-select option[value='chatqna']", state="attached")
        assert page.locator("#index-select option").all_text_contents() == ["chatqna (default)"]
        page.set_input_files("#file-input", str(herons))
        page.click("#upload-button")
        page.wait_for_selector("#documents li:has-text('herons.txt')")

        page.click("#new-index")
        page.wait_for_selector("#index-select option[value='pottery']", state="attached")
        assert page.locator("#index-select option").all_text_contents() == ["chatqna (default)", "pottery (new)"]
        assert page.input_value("#index-select") == "pottery" and page.locator("#documents li").count() == 0
        page.set_input_files("#file-input", str(kilns))
        page.click("#upload-button")
        page.wait_for_selector("#documents li:has-text('kilns.txt')")
        assert page.locator("#documents li").all_text_contents()[0].startswith("kilns.txt")
        assert page.locator("#index-select option").all_text_contents() == ["chatqna (default)", "pottery"]
        assert httpx.get(server.url + "/v1/dataprep/indices").json() == ["chatqna", "pottery"]

        ask(page, "How hot is a kiln?")
        page.wait_for_selector(".message.assistant.done")
        sources = page.locator(".message.assistant .sources li").all_text_contents()
        assert sources and all(source.startswith("kilns.txt") for source in sources), sources

        page.select_option("#index-select", "chatqna")
        page.wait_for_selector("#documents li:has-text('herons.txt')")
        assert page.locator("#documents li").count() == 1
        page.select_option("#index-select", "pottery")
        page.wait_for_selector("#documents li:has-text('kilns.txt')")
        page.click("#delete-all")
        page.wait_for_selector("#documents li:has-text('herons.txt')")  # back on the default index
        assert page.input_value("#index-select") == "chatqna"
        assert page.locator("#index-select option").all_text_contents() == ["chatqna (default)"]
        assert httpx.get(server.url + "/v1/dataprep/indices").json() == ["chatqna"]
