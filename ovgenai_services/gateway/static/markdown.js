// A small Markdown renderer for the chat page's answers. It builds DOM nodes and sets only their text, so nothing
// an answer holds is ever parsed as HTML: `<img onerror=…>` shows as those characters. Links open only for http,
// https and mailto addresses; any other scheme (javascript:, data:, …) stays plain text. What it renders:
// paragraphs, # headings, - / 1. lists, > quotes, ``` code blocks (an unclosed one too, while an answer streams),
// `code`, **bold**, *italic* / _italic_, [links](https://…) and bare https:// addresses.
"use strict";

const SAFE_URL = /^(?:https?:\/\/|mailto:)/i;
const INLINE = new RegExp([
  /(`+)([\s\S]*?[^`])\1(?!`)/.source,                       // 1, 2: code
  /\*\*(?=\S)([\s\S]*?\S)\*\*/.source,                      // 3: bold
  /(?<![\w*])\*(?=[^\s*])([^*]*?[^\s*])\*(?![\w*])/.source, // 4: italic
  /(?<!\w)_(?=[^\s_])([^_]*?[^\s_])_(?!\w)/.source,         // 5: italic
  /\[([^\]\n]+)\]\(([^()\s]+)\)/.source,                    // 6, 7: link
  /(https?:\/\/[^\s<>()"']*[^\s<>()"'.,;:!?])/.source,      // 8: a bare address
].join("|"), "g");

function element(tag, ...children) {
  const node = document.createElement(tag);
  node.append(...children);
  return node;
}

function link(label, url) {
  if (!SAFE_URL.test(url)) return null;
  const anchor = element("a");
  // No link inside a link: an address in the label (a bare one is its own label) stays text, and each nested
  // call reads a shorter text, so rendering ends.
  inline(label, anchor, false);
  anchor.href = url;
  anchor.rel = "noopener noreferrer nofollow";
  anchor.target = "_blank";
  return anchor;
}

// Inline spans of `text` appended to `parent`, as text nodes and elements only; `links` false inside a link.
function inline(text, parent, links = true) {
  let last = 0;
  for (const match of text.matchAll(INLINE)) {
    parent.append(text.slice(last, match.index));
    last = match.index + match[0].length;
    const [whole, , code, bold, star, underscore, label, url, bare] = match;
    let node = null;
    if (code !== undefined) node = element("code", code.trim() ? code.replace(/^ (.*) $/s, "$1") : code);
    else if (bold !== undefined) inline(bold, (node = element("strong")), links);
    else if (star !== undefined || underscore !== undefined) inline(star ?? underscore, (node = element("em")), links);
    else if (!links) node = null;  // a link's match inside a link: its text as written
    else if (label !== undefined) node = link(label, url);
    else if (bare !== undefined) node = link(bare, bare);
    parent.append(node ?? whole);
  }
  parent.append(text.slice(last));
}

const FENCE = /^\s{0,3}(```+|~~~+)\s*([\w+-]*)\s*$/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const ITEM = /^\s{0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || ITEM.test(line) || QUOTE.test(line);
}

// `text` as a fragment of block elements.
function renderMarkdown(text) {
  const out = document.createDocumentFragment();
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let match;
    if (!line.trim()) {
      i++;
    } else if ((match = FENCE.exec(line))) {
      const body = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(match[1]); i++) body.push(lines[i]);
      i++;  // the closing fence (or the end of an answer still streaming)
      const code = element("code", body.join("\n"));
      if (match[2]) code.dataset.language = match[2];
      out.append(element("pre", code));
    } else if ((match = HEADING.exec(line))) {
      const heading = element(`h${Math.min(6, match[1].length + 2)}`);
      inline(match[2], heading);
      out.append(heading);
      i++;
    } else if ((match = ITEM.exec(line))) {
      const ordered = /\d/.test(match[1]);
      const list = element(ordered ? "ol" : "ul");
      if (ordered && parseInt(match[1], 10) !== 1) list.start = parseInt(match[1], 10);
      while (i < lines.length && (match = ITEM.exec(lines[i])) && /\d/.test(match[1]) === ordered) {
        const item = element("li");
        const text = [match[2]];
        // Lines that continue the item: indented, and not a new item or block.
        for (i++; i < lines.length && /^\s+\S/.test(lines[i]) && !startsBlock(lines[i]); i++) {
          text.push(lines[i].trim());
        }
        inline(text.join("\n"), item);
        list.append(item);
      }
      out.append(list);
    } else if (QUOTE.test(line)) {
      const quoted = [];
      for (; i < lines.length && (match = QUOTE.exec(lines[i])); i++) quoted.push(match[1]);
      out.append(element("blockquote", renderMarkdown(quoted.join("\n"))));
    } else {
      const paragraph = [];
      for (; i < lines.length && lines[i].trim() && !startsBlock(lines[i]); i++) paragraph.push(lines[i]);
      const p = element("p");
      inline(paragraph.join("\n"), p);
      out.append(p);
    }
  }
  return out;
}
