const http = require("http");
const server = http.createServer((req, res) => {
  res.setHeader("content-type", "text/html");
  res.end("<!doctype html><title>shared browser</title><style>html,body{margin:0;height:100%;background:#@COLOUR@}h1{margin:0;font:12px sans-serif}</style><h1>shared browser @TOKEN@</h1>");
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
