/**
 * Shared jest settings. Type checking is `npm run typecheck`'s job, so the transform (swc) only
 * strips types and stays fast.
 * @type {import('jest').Config}
 */
module.exports = {
  rootDir: __dirname,
  testEnvironment: 'node',
  transform: {
    '^.+\\.(t|j)sx?$': ['@swc/jest', { jsc: { target: 'es2023' } }],
    // unpdf ships .cjs/.mjs: swc turns its ESM pdf.js bundle and its dynamic import() into CommonJS.
    '/node_modules/unpdf/.+\\.(c|m)js$': ['@swc/jest', { jsc: { target: 'es2023' } }],
  },
  // ESM-only packages in node_modules are transformed to CommonJS too: unpdf, and the node-fetch
  // chain that teeny-request (under the Google clients) loads with import(), which jest's vm refuses.
  transformIgnorePatterns: [
    '/node_modules/(?!(unpdf|teeny-request|node-fetch|fetch-blob|formdata-polyfill|data-uri-to-buffer)/)',
  ],
  // Source files import siblings as `./x.js` where Node's ESM rules ask for it; jest resolves them to `./x.ts`.
  moduleNameMapper: {
    '^(\\.{1,2}/.*)\\.js$': '$1',
    // `unpdf/pdfjs` is exported for `import` only; point jest's require at the file.
    '^unpdf/pdfjs$': '<rootDir>/node_modules/unpdf/dist/pdfjs.mjs',
  },
  moduleFileExtensions: ['ts', 'js', 'mjs', 'cjs', 'json'],
  testTimeout: 60_000,
};
