/**
 * Preloaded into a bench's Cloudly process (NODE_OPTIONS=--import …; node refuses `--cpu-prof`
 * there): records a V8 CPU profile of the whole process and writes it into CLOUDLY_BENCH_PROFILE_DIR
 * when the process exits (a SIGTERM stop exits; a SIGKILL writes nothing).
 */
import inspector from 'node:inspector';
import fs from 'node:fs';
import path from 'node:path';

const dir = process.env.CLOUDLY_BENCH_PROFILE_DIR;
if (dir) {
  const session = new inspector.Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.start');
  process.on('exit', () => {
    // A session in the same thread answers synchronously, so the file is written before exit.
    session.post('Profiler.stop', (errorArg, resultArg) => {
      if (!errorArg) {
        fs.writeFileSync(path.join(dir, `cloudly-${process.pid}-${Date.now()}.cpuprofile`), JSON.stringify(resultArg.profile));
      }
    });
  });
}
