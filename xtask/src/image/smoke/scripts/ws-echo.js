const WebSocket = require("@INSTALL_DIR@/node_modules/ws");
const server = new WebSocket.WebSocketServer({ host: "127.0.0.1", port: 0 }, () => {
  const client = new WebSocket(`ws://127.0.0.1:${server.address().port}/`);
  client.on("open", () => client.send("ping-@TOKEN@"));
  client.on("message", (data) => { console.log("echo: " + data); process.exit(0); });
});
server.on("connection", (socket) => socket.on("message", (data) => socket.send(String(data))));
setTimeout(() => { console.error("no echo within 30 s"); process.exit(1); }, 30000);
