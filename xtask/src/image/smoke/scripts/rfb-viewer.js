// A viewer through a WebSocket bridge built on the ws of the template: the bridge carries RFB between
// a WebSocket and the TCP port of Xtigervnc, as the authenticated viewer of an application would; the
// client speaks RFB 3.8 (RFC 6143) over it, asks for raw 32-bit pixels of the middle of the
// screen and counts those of the colour of the page.
const net = require("net");
const WebSocket = require("@INSTALL_DIR@/node_modules/ws");
const colour = "@COLOUR@";
const want = [0, 2, 4].map((i) => parseInt(colour.slice(i, i + 2), 16));
const vncPort = Number("@VNC_PORT@");
const fail = (why) => { console.error("viewer: " + why); process.exit(1); };
setTimeout(() => fail("no matching framebuffer within 30 s"), 30000);
const bridge = new WebSocket.WebSocketServer({ host: "127.0.0.1", port: 0 }, () => {
  const ws = new WebSocket(`ws://127.0.0.1:${bridge.address().port}/`);
  ws.binaryType = "nodebuffer";
  let buffer = Buffer.alloc(0);
  const waiting = [];
  const pump = () => {
    while (waiting.length && buffer.length >= waiting[0].n) {
      const { n, resolve } = waiting.shift();
      const bytes = buffer.subarray(0, n);
      buffer = buffer.subarray(n);
      resolve(bytes);
    }
  };
  ws.on("message", (data) => { buffer = Buffer.concat([buffer, data]); pump(); });
  ws.on("error", (err) => fail("websocket: " + err.message));
  const read = (n) => new Promise((resolve) => { waiting.push({ n, resolve }); pump(); });
  ws.on("open", async () => {
    const version = (await read(12)).toString();
    if (!version.startsWith("RFB 003.")) fail("not an RFB server: " + JSON.stringify(version));
    ws.send(Buffer.from("RFB 003.008\n"));
    const types = [...(await read((await read(1))[0]))];
    if (!types.includes(1)) fail("security types " + types + " lack None");
    ws.send(Buffer.from([1]));
    if ((await read(4)).readUInt32BE(0) !== 0) fail("security handshake refused");
    ws.send(Buffer.from([1]));
    const init = await read(24);
    const width = init.readUInt16BE(0), height = init.readUInt16BE(2);
    const name = (await read(init.readUInt32BE(20))).toString();
    // SetPixelFormat: 32 bpp, depth 24, little-endian true colour, red at bit 16, blue at 0.
    const format = Buffer.from([0, 0, 0, 0, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0]);
    // SetEncodings: Raw only.
    const encodings = Buffer.from([2, 0, 0, 1, 0, 0, 0, 0]);
    ws.send(Buffer.concat([format, encodings]));
    const w = Math.floor(width / 2), h = Math.floor(height / 3);
    const x = Math.floor((width - w) / 2), y = Math.floor(height / 2);
    for (let attempt = 1; attempt <= 20; attempt++) {
      const request = Buffer.alloc(10);
      request.writeUInt8(3, 0);
      request.writeUInt16BE(x, 2); request.writeUInt16BE(y, 4);
      request.writeUInt16BE(w, 6); request.writeUInt16BE(h, 8);
      ws.send(request);
      let type = (await read(1))[0];
      while (type !== 0) {
        if (type === 2) { type = (await read(1))[0]; continue; }
        if (type === 3) { await read(3); await read((await read(4)).readUInt32BE(0)); type = (await read(1))[0]; continue; }
        fail("unexpected server message " + type);
      }
      const rects = (await read(3)).readUInt16BE(1);
      let pixels = 0, matching = 0;
      for (let r = 0; r < rects; r++) {
        const head = await read(12);
        const rw = head.readUInt16BE(4), rh = head.readUInt16BE(6), encoding = head.readInt32BE(8);
        if (encoding !== 0) fail("rectangle encoding " + encoding + ", asked for raw only");
        const data = await read(rw * rh * 4);
        for (let i = 0; i < data.length; i += 4) {
          pixels++;
          const close = (got, c) => Math.abs(got - c) <= 4;
          if (close(data[i + 2], want[0]) && close(data[i + 1], want[1]) && close(data[i], want[2])) matching++;
        }
      }
      if (pixels > 0 && matching / pixels >= 0.95) {
        console.log(`viewer: ${name} ${width}x${height} over a ws bridge; ${matching} of ${pixels} pixels in the middle are #${colour} (attempt ${attempt})`);
        process.exit(0);
      }
      console.error(`viewer: attempt ${attempt}: ${matching} of ${pixels} pixels are #${colour}`);
      await new Promise((done) => setTimeout(done, 500));
    }
    fail("the framebuffer never showed the page");
  });
});
bridge.on("connection", (socket) => {
  const vnc = net.connect(vncPort, "127.0.0.1");
  socket.on("message", (data) => vnc.write(data));
  vnc.on("data", (data) => socket.send(data));
  vnc.on("error", (err) => fail("bridge to 127.0.0.1:" + vncPort + ": " + err.message));
  socket.on("close", () => vnc.end());
});
