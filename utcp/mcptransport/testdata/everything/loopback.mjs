// Preloaded (node --import) into the reference MCP server, which listens
// on every interface: a listen given only a port gets 127.0.0.1, and the
// port bound is written to stderr for the test that started it.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  this.once("listening", () => {
    process.stderr.write(`EXPRD_LISTENING ${this.address().port}\n`);
  });
  const first = args[0];
  if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    const callback = args.find((a) => typeof a === "function");
    return listen.call(this, { port: Number(first), host: "127.0.0.1" }, callback);
  }
  return listen.apply(this, args);
};
