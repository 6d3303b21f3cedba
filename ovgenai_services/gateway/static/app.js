// The ChatQnA page: pick an index (or name a new one, made by its first upload), upload documents to it, list them,
// ask questions of it, stream answers (rendered as Markdown by
// markdown.js, which never parses HTML) with their sources and the time each stage of the answer took; Stop ends an
// answer, and deleting every document asks first.
// Plain browser JavaScript, no build step and nothing fetched from outside this gateway.
"use strict";

const $ = (id) => document.getElementById(id);

// The gateway's API (/v1) may require its API key (SERVICE_API_KEY): asked once when it answers 401, kept for
// this tab only, and sent as a bearer token.
async function api(path, options = {}) {
  const withKey = () => {
    const key = sessionStorage.getItem("apiKey");
    const headers = { ...(options.headers || {}), ...(key ? { Authorization: `Bearer ${key}` } : {}) };
    return fetch(path, { ...options, headers });
  };
  let response = await withKey();
  if (response.status === 401) {
    const key = window.prompt("This gateway needs its API key:");
    if (key) {
      sessionStorage.setItem("apiKey", key);
      response = await withKey();
    }
  }
  return response;
}

async function refreshHealth() {
  const badge = $("health");
  try {
    const response = await fetch("/health");
    badge.textContent = response.ok ? "ready" : "degraded";
    badge.className = "badge " + (response.ok ? "ok" : "down");
  } catch {
    badge.textContent = "offline";
    badge.className = "badge down";
  }
}

// The index the page works on: the gateway's default until another is picked (kept for this tab). A new name is
// offered until its first upload makes it.
let currentIndex = sessionStorage.getItem("index");
let defaultIndex = null;

async function refreshIndices() {
  const response = await api("/v1/dataprep/indices");
  if (!response.ok) return;
  const names = await response.json();
  defaultIndex = response.headers.get("X-Default-Index") || names[0];
  if (!currentIndex) currentIndex = defaultIndex;
  const select = $("index-select");
  select.replaceChildren(...[...new Set([...names, currentIndex])].sort().map((name) => {
    const option = document.createElement("option");
    option.value = name;
    option.textContent = name === defaultIndex ? `${name} (default)` : names.includes(name) ? name : `${name} (new)`;
    return option;
  }));
  select.value = currentIndex;
}

async function pickIndex(name) {
  currentIndex = name;
  sessionStorage.setItem("index", name);
  await refreshIndices();
  await refreshDocuments();
}

async function refreshDocuments() {
  const list = $("documents");
  const response = await api("/v1/dataprep/get", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ index_name: currentIndex }),
  });
  const docs = response.ok ? await response.json() : [];
  list.replaceChildren(...docs.map((doc) => {
    const item = document.createElement("li");
    const label = document.createElement("span");
    label.textContent = `${doc.name} (${doc.chunks} chunks)`;
    const remove = document.createElement("button");
    remove.textContent = "✕";
    remove.className = "secondary";
    remove.title = `Delete ${doc.name}`;
    remove.onclick = () => deleteDocument(doc.name);
    item.append(label, remove);
    return item;
  }));
}

// Deleting every document of an index other than the default deletes the index too: the page goes back to the
// default one.
async function deleteDocument(name) {
  await api("/v1/dataprep/delete", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ file_path: name, index_name: currentIndex }),
  });
  if (name === "all" && currentIndex !== defaultIndex) await pickIndex(defaultIndex);
  else await refreshDocuments();
}

$("index-select").addEventListener("change", (event) => pickIndex(event.target.value));

$("new-index").addEventListener("click", () => {
  const name = window.prompt("Name of the new index (3 to 63 letters, digits, '.', '_' or '-'):");
  if (name && name.trim()) pickIndex(name.trim());
});

async function errorMessage(response) {
  try { return (await response.json()).error.message; } catch { return `HTTP ${response.status}`; }
}

$("upload-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const files = $("file-input").files;
  if (!files.length) return;
  const status = $("upload-status");
  const form = new FormData();
  for (const file of files) form.append("files", file, file.name);
  if (currentIndex) form.append("index_name", currentIndex);
  $("upload-button").disabled = true;
  status.textContent = `Uploading ${files.length} file(s)…`;
  try {
    const response = await api("/v1/dataprep/ingest", { method: "POST", body: form });
    if (!response.ok) {
      status.textContent = `Upload failed: ${await errorMessage(response)}`;
    } else {
      const result = await response.json();
      status.textContent = result.documents.map((d) => `${d.name}: ${d.status}, ${d.chunks} chunks`).join("; ");
      $("file-input").value = "";
    }
  } finally {
    $("upload-button").disabled = false;
    await refreshIndices();
    await refreshDocuments();
  }
});

$("delete-all").addEventListener("click", () => {
  const count = $("documents").children.length;
  const what = count === 1 ? "the 1 document" : `all ${count} documents`;
  if (window.confirm(`Delete ${what} of the index '${currentIndex}'? This cannot be undone.`)) {
    deleteDocument("all");
  }
});

const history = [];

function addMessage(role, text) {
  const element = document.createElement("div");
  element.className = `message ${role}`;
  element.textContent = text;
  $("messages").append(element);
  element.scrollIntoView({ block: "end" });
  return element;
}

function showSources(element, final) {
  const box = document.createElement("div");
  box.className = "sources";
  if (final.retrieval) box.textContent = final.retrieval;
  if (final.sources && final.sources.length) {
    const list = document.createElement("ul");
    for (const source of final.sources) {
      const item = document.createElement("li");
      const rerank = source.rerank_score === undefined ? "" : ` · rerank ${source.rerank_score}`;
      item.textContent = `${source.document} · chunk ${source.chunk} · score ${source.score}${rerank}`;
      list.append(item);
    }
    box.append("Sources:", list);
  }
  element.append(box);
}

const STAGES = [["embed", "embed"], ["retrieve", "retrieve"], ["rerank", "rerank"],
                ["llm_first_token", "first token"], ["total", "total"]];

function duration(ms) {
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`;
}

// The time each stage took, as the final chunk reports it; a stage the answer did not go through shows "–".
function showTimings(element, timings) {
  if (!timings) return;
  const box = document.createElement("div");
  box.className = "timings";
  for (const [key, label] of STAGES) {
    const ms = timings[`${key}_ms`];
    const stage = document.createElement("span");
    stage.dataset.stage = key;
    stage.textContent = `${label} ${ms === null || ms === undefined ? "–" : duration(ms)}`;
    box.append(stage);
  }
  element.append(box);
}

// Reads `data: {json}` events from a fetch body as they arrive.
async function* sseEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      for (const line of event.split("\n")) {
        if (line.startsWith("data: ")) yield line.slice(6);
      }
    }
  }
}

// An answer's text, rendered as Markdown at most once a frame while it streams.
function answerView(answer) {
  const content = document.createElement("div");
  content.className = "content";
  answer.append(content);
  let text = "";
  let pending = false;
  const render = () => {
    pending = false;
    try {
      content.replaceChildren(renderMarkdown(text));
    } catch (error) {  // a fault of the renderer must not cost the answer: it shows as plain text instead
      console.error(error);
      content.textContent = text;
    }
  };
  return {
    add(delta) {
      text += delta;
      if (!pending) { pending = true; requestAnimationFrame(render); }
    },
    finish() { render(); return text; },
  };
}

function addNote(answer, text) {
  answer.append(Object.assign(document.createElement("div"), { className: "note", textContent: text }));
}

let asking = null;  // the AbortController of the answer streaming now

$("stop-button").addEventListener("click", () => asking?.abort());

$("ask-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question || asking) return;
  $("question").value = "";
  $("ask-button").disabled = true;
  $("stop-button").hidden = false;
  addMessage("user", question);
  history.push({ role: "user", content: question });
  const answer = addMessage("assistant", "");
  answer.classList.add("streaming");
  const view = answerView(answer);
  asking = new AbortController();
  try {
    const response = await api("/v1/chatqna", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ messages: history, stream: true, index_name: currentIndex }), signal: asking.signal,
    });
    if (!response.ok) throw new Error(await errorMessage(response));
    for await (const data of sseEvents(response)) {
      if (data === "[DONE]") break;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message);
      const choice = chunk.choices[0];
      if (choice.delta.content) view.add(choice.delta.content);
      if (choice.finish_reason) {
        view.finish();
        showSources(answer, chunk);
        showTimings(answer, chunk.timings);
      }
    }
    history.push({ role: "assistant", content: view.finish() });
  } catch (error) {
    if (error.name === "AbortError") {  // Stop: the answer so far stays, and the gateway stops generating
      const text = view.finish();
      answer.classList.add("stopped");
      addNote(answer, "stopped");
      history.push({ role: "assistant", content: text });
    } else {  // what streamed before the error stays, the error beneath it; a question left unanswered is dropped
      const text = view.finish();
      answer.classList.add("error");
      addNote(answer, `Error: ${error.message}`);
      if (text) history.push({ role: "assistant", content: text });
      else history.pop();
    }
  } finally {
    asking = null;
    answer.classList.remove("streaming");
    answer.classList.add("done");
    $("ask-button").disabled = false;
    $("stop-button").hidden = true;
  }
});

refreshHealth();
refreshIndices().then(refreshDocuments);
setInterval(refreshHealth, 10000);
