/**
 * Preloaded into a bench's Cloudly (or database) process (NODE_OPTIONS=--import …; node refuses
 * `--cpu-prof` there): records a V8 CPU profile of the process and writes it into
 * CLOUDLY_BENCH_PROFILE_DIR.
 *
 * A profile is cut into segments: on SIGUSR2 the segment recorded so far is written and a new one
 * begins, named after the text of the file `phase` in that directory (the bench writes the name of
 * the segment that just ended there, then signals), so a storm's CPU can be read apart from the
 * start and the seeding before it. The last segment is written when the process exits (a SIGTERM
 * stop exits; a SIGKILL writes nothing). Files: `<CLOUDLY_BENCH_PROFILE_NAME>-<pid>-<n>-<phase>.cpuprofile`.
 */
import inspector from 'node:inspector';
import fs from 'node:fs';
import path from 'node:path';

const dir = process.env.CLOUDLY_BENCH_PROFILE_DIR;
if (dir) {
  const name = process.env.CLOUDLY_BENCH_PROFILE_NAME || 'cloudly';
  const session = new inspector.Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.start');
  let segment = 0;
  const phase = (fallbackArg) => {
    try {
      return fs.readFileSync(path.join(dir, 'phase'), 'utf8').trim().replace(/[^\w.-]+/g, '-') || fallbackArg;
    } catch {
      return fallbackArg;
    }
  };
  // A session in the same thread answers synchronously, so the file is written before the next step.
  const cut = (labelArg, againArg) => {
    session.post('Profiler.stop', (errorArg, resultArg) => {
      if (!errorArg) {
        fs.writeFileSync(path.join(dir, `${name}-${process.pid}-${segment++}-${labelArg}.cpuprofile`), JSON.stringify(resultArg.profile));
      }
    });
    if (againArg) {
      session.post('Profiler.start');
    }
  };
  process.on('SIGUSR2', () => cut(phase('segment'), true));
  process.on('exit', () => cut('exit', false));
}
