import { defineConfig } from "vite";

// The dashboard is served by the router daemon itself (embedded in its binary), from `/`.
// Everything it loads comes from that origin: no CDN, no web font, no other host.
export default defineConfig({
  base: "/",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    assetsInlineLimit: 0,
    sourcemap: false,
    reportCompressedSize: true,
  },
});
