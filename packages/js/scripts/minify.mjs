// Minifies jco's generated module once it is patched and checked: jco's output is about
// 1.2 MB of readable JavaScript (116 KB gzipped), most of it the component-model runtime and
// each export's lifting and lowering code; minified it is about 480 KB (65 KB gzipped), which
// is what the npm tarball and a Worker's bundle carry. oxc's minifier (a dev dependency, the
// one jco itself depends on) keeps the module's exports and its imports as they are.
import { minify } from 'oxc-minify'

/** The minified text of the generated module `js` (`name` is only for messages). */
export async function minifyGenerated(js, name) {
  const result = await minify(name, js, { compress: true, mangle: { toplevel: false }, module: true })
  if (result.errors?.length) {
    throw new Error(`minifying ${name} failed: ${result.errors.map((e) => e.message ?? String(e)).join('; ')}`)
  }
  return result.code
}
