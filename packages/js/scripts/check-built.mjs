// Fails early, with a hint, when `npm run build` has not produced gen/ yet.
import { existsSync } from 'node:fs'
const gen = new URL('../gen/oma_portable_json.js', import.meta.url)
if (!existsSync(gen)) {
  console.error('oma-component: gen/oma_portable_json.js is missing; run `npm run build` first')
  process.exit(1)
}
