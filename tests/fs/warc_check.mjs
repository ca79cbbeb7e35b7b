// warc_check.mjs - read WARC files with warcio (webrecorder's warcio.js,
// installed by tools/install-deps.sh into build/node) and check every
// record as a replay tool would rely on it:
//   - the block's SHA-1 (base32) equals WARC-Block-Digest;
//   - the payload's (the block after the HTTP header for response, the
//     block for resource) equals WARC-Payload-Digest;
//   - a revisit has the identical-payload-digest profile, and its
//     WARC-Refers-To, -Target-URI and -Date name an earlier record of these
//     files with the same payload digest.
// Prints one JSON line of counts; exits 1 on the first mismatch (printed).
//
//   node warc_check.mjs NODE_MODULES_DIR [--list] FILE...
// --list also prints "TYPE URI PAYLOAD-DIGEST" for each record but warcinfo.
import { createRequire } from "node:module";
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";

let [modules, ...files] = process.argv.slice(2);
const list = files[0] === "--list";
if (list) files = files.slice(1);
const require = createRequire(path.resolve(modules) + "/");
const { WARCParser } = require("warcio");

const B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
function base32(buf) {
  let bits = 0, value = 0, out = "";
  for (const b of buf) {
    value = (value << 8) | b; bits += 8;
    while (bits >= 5) { out += B32[(value >>> (bits - 5)) & 31]; bits -= 5; }
  }
  if (bits > 0) out += B32[(value << (5 - bits)) & 31];
  return out;
}
const sha1 = (buf) => "sha1:" + base32(createHash("sha1").update(buf).digest());

function die(msg) { console.error("warc_check: " + msg); process.exit(1); }

const byId = new Map();
const counts = { files: 0, records: 0, warcinfo: 0, response: 0, resource: 0, revisit: 0, other: 0 };
for (const file of files) {
  counts.files++;
  const parser = new WARCParser(fs.createReadStream(file), { parseHttp: false });
  let first = true;
  for await (const rec of parser) {
    counts.records++;
    const type = rec.warcType;
    counts[type in counts ? type : "other"]++;
    if (first && type !== "warcinfo") die(`${file}: the first record is ${type}, not warcinfo`);
    first = false;
    const block = await rec.readFully(false);
    if (block.length !== rec.warcContentLength) die(`${file}: ${rec.warcHeader("WARC-Record-ID")}: block of ${block.length} bytes, Content-Length ${rec.warcContentLength}`);
    if (list && type !== "warcinfo") console.log(`${type} ${rec.warcTargetURI} ${rec.warcPayloadDigest}`);
    const bd = rec.warcBlockDigest;
    if (!bd) die(`${file}: ${type} record without WARC-Block-Digest`);
    if (sha1(block) !== bd) die(`${file}: ${rec.warcTargetURI}: block digest ${bd}, computed ${sha1(block)}`);
    if (type === "response" || type === "resource") {
      let payload = block;
      if (type === "response") {
        const i = Buffer.from(block).indexOf("\r\n\r\n");
        if (i < 0) die(`${file}: response without an HTTP header`);
        payload = block.subarray(i + 4);
      }
      const pd = rec.warcPayloadDigest;
      if (sha1(payload) !== pd) die(`${file}: ${rec.warcTargetURI}: payload digest ${pd}, computed ${sha1(payload)}`);
      byId.set(rec.warcHeader("WARC-Record-ID"), { uri: rec.warcTargetURI, date: rec.warcDate, digest: pd });
    } else if (type === "revisit") {
      const prof = rec.warcHeader("WARC-Profile");
      if (prof !== "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest") die(`revisit profile ${prof}`);
      const orig = byId.get(rec.warcHeader("WARC-Refers-To"));
      if (!orig) die(`${rec.warcTargetURI}: revisit names ${rec.warcHeader("WARC-Refers-To")}, no earlier record`);
      if (orig.uri !== rec.warcRefersToTargetURI) die(`${rec.warcTargetURI}: WARC-Refers-To-Target-URI ${rec.warcRefersToTargetURI}, the record is ${orig.uri}`);
      if (orig.date !== rec.warcRefersToDate) die(`${rec.warcTargetURI}: WARC-Refers-To-Date ${rec.warcRefersToDate}, the record's is ${orig.date}`);
      if (orig.digest !== rec.warcPayloadDigest) die(`${rec.warcTargetURI}: revisit payload digest ${rec.warcPayloadDigest}, the record's ${orig.digest}`);
    }
  }
}
console.log(JSON.stringify(counts));
