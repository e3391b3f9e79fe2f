// SPDX-License-Identifier: Apache-2.0
// An infinity-bus handler in Node, no packages: ibus run --plugin http.so
// --plugin-config http=url=http://127.0.0.1:8080/ POSTs each event here.
// It dedups nothing itself: ibus sends each event once per Idempotency-Key,
// and a repeat after a crash carries the same key.
const http = require("node:http");

http
  .createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const event = JSON.parse(Buffer.concat(chunks));
      console.log(req.headers["idempotency-key"], event.type, event.payload);
      res.writeHead(204); // 2xx: done. 503 retries, 422 dead-letters.
      res.end();
    });
  })
  .listen(Number(process.env.PORT || 8080), "127.0.0.1");
