'use strict';
// One process for a whole batch: reads JSON lines on stdin, answers each with one JSON
// line on stdout, in order, through joynr's own JavaScript SMRF library (npm smrf).
//
//   {"op": "decode", "frame": <base64>}
//     -> {"ok": true, "recipient", "sender", "ttlMs", "isTtlAbsolute", "isCompressed",
//         "headers": [[key, value], ...], "body": <base64>, "signature": <base64> | null}
//   {"op": "encode", "recipient", "sender", "ttlMs", "isTtlAbsolute", "isCompressed",
//    "headers": [[key, value], ...], "body": <base64>, "signature": <base64> | null}
//     -> {"ok": true, "frame": <base64>}
//   anything smrf throws -> {"ok": false, "error": <its message>}
//
// Bytes travel as base64; ttlMs as a JSON number, exact below 2^53 (smrf's own limit: it
// reads the int64 with Long.toFloat64).

const readline = require('readline');
const smrf = require('smrf');

function decode(request) {
    const message = smrf.deserialize(Buffer.from(request.frame, 'base64'));
    return {
        ok: true,
        recipient: message.recipient,
        sender: message.sender,
        ttlMs: message.ttlMs,
        isTtlAbsolute: message.isTtlAbsolute,
        isCompressed: message.isCompressed,
        headers: Object.entries(message.headers),
        body: Buffer.from(message.body).toString('base64'),
        signature: message.signature === undefined ? null : Buffer.from(message.signature).toString('base64')
    };
}

function encode(request) {
    const headers = {};
    for (const [key, value] of request.headers) {
        headers[key] = value;
    }
    const message = {
        recipient: request.recipient,
        sender: request.sender,
        ttlMs: request.ttlMs,
        isTtlAbsolute: request.isTtlAbsolute,
        isCompressed: request.isCompressed,
        headers,
        body: Buffer.from(request.body, 'base64')
    };
    if (request.signature !== null && request.signature !== undefined) {
        const signature = Buffer.from(request.signature, 'base64');
        message.signingCallback = () => signature;
    }
    return { ok: true, frame: smrf.serialize(message).toString('base64') };
}

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on('line', line => {
    let answer;
    try {
        const request = JSON.parse(line);
        answer = request.op === 'decode' ? decode(request) : encode(request);
    } catch (error) {
        answer = { ok: false, error: String(error && error.message ? error.message : error) };
    }
    process.stdout.write(JSON.stringify(answer) + '\n');
});
