const http = require("http");
const server = http.createServer((req, res) => {
  res.setHeader("content-type", "text/html");
  res.end("<!doctype html><title>smoke</title><h1>coding-agent smoke @TOKEN@</h1>");
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
