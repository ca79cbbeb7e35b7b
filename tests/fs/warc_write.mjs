// warc_write.mjs - write a WARC with warcio (webrecorder's warcio.js), a
// writer no one here wrote, for tests/fs/t_warc.sh to import: a response
// with HTTP headers, a resource, and a revisit of the response (each a
// gzip member, as warcio writes them).
//
//   node warc_write.mjs NODE_MODULES_DIR OUT.warc.gz
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const [modules, out] = process.argv.slice(2);
const require = createRequire(path.resolve(modules) + "/");
const { WARCRecord, WARCSerializer } = require("warcio");

async function* body(text) { yield new TextEncoder().encode(text); }
const page = "<html><body>" + "<p>written by warcio</p>".repeat(50) + "</body></html>\n";
const recs = [
  WARCRecord.create({ url: "http://w.example/dir/", date: "2022-03-04T05:06:07Z", type: "response", warcVersion: "WARC/1.1",
    statusline: "HTTP/1.1 200 OK", httpHeaders: { "Content-Type": "text/html; charset=utf-8" } }, body(page)),
  WARCRecord.create({ url: "http://w.example/notes.txt", date: "2022-03-04T05:06:08Z", type: "resource", warcVersion: "WARC/1.1",
    warcHeaders: { "Content-Type": "text/plain" } }, body("plain notes\n")),
];
const chunks = [];
for (const r of recs) chunks.push(await WARCSerializer.serialize(r, { gzip: true }));
// a revisit of the first, naming it as warcprox does
const first = recs[0];
const rv = WARCRecord.create({ url: "http://w.example/dir/again.html", date: "2022-03-05T00:00:00Z", type: "revisit", warcVersion: "WARC/1.1",
  statusline: "HTTP/1.1 200 OK", httpHeaders: { "Content-Type": "text/html; charset=utf-8" },
  refersToUrl: first.warcTargetURI, refersToDate: first.warcDate,
  warcHeaders: { "WARC-Refers-To": first.warcHeader("WARC-Record-ID"), "WARC-Payload-Digest": first.warcPayloadDigest,
    "WARC-Profile": "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest" } }, body(""));
chunks.push(await WARCSerializer.serialize(rv, { gzip: true }));
fs.writeFileSync(out, Buffer.concat(chunks.map((c) => Buffer.from(c))));
console.log(page.length);
