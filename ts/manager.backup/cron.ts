/**
 * Five-field cron expressions in UTC, the classic `minute hour day-of-month month day-of-week`:
 * each field is `*`, a number, a range `a-b`, a step `*\/n` or `a-b/n` or `a/n`, or a list of
 * those separated by commas. Day-of-week runs 0–7 with both 0 and 7 meaning Sunday. When both
 * day fields are restricted a day matches if either does (Vixie cron's rule, which Kubernetes'
 * CronJob follows). Names (`MON`, `JAN`), `?`, `L`, `W`, `#` and `@hourly`-style macros are not
 * accepted: a schedule says its time in numbers only.
 */

interface ICronFieldSpec {
  name: string;
  min: number;
  max: number;
}

const cronFields: readonly ICronFieldSpec[] = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day-of-month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12 },
  { name: 'day-of-week', min: 0, max: 7 },
];

/** The longest expression accepted; a real one is a few dozen characters. */
export const maximumCronLength = 200;

export interface ICronSchedule {
  minutes: ReadonlySet<number>;
  hours: ReadonlySet<number>;
  daysOfMonth: ReadonlySet<number>;
  months: ReadonlySet<number>;
  /** 0–6, Sunday is 0. */
  daysOfWeek: ReadonlySet<number>;
  /** Whether each day field was `*` (matters for the either-day rule). */
  anyDayOfMonth: boolean;
  anyDayOfWeek: boolean;
}

/** One problem of an expression: which field (or the whole) and why, as a sentence without the path. */
export interface ICronProblem {
  field: string | null;
  message: string;
}

const integerText = /^\d{1,4}$/;

const parseField = (textArg: string, specArg: ICronFieldSpec): { values: Set<number>; problems: ICronProblem[] } => {
  const values = new Set<number>();
  const problems: ICronProblem[] = [];
  const problem = (messageArg: string) => problems.push({ field: specArg.name, message: messageArg });
  const inRange = (valueArg: number): boolean => valueArg >= specArg.min && valueArg <= specArg.max;
  for (const part of textArg.split(',')) {
    if (part === '') {
      problem(`has an empty list item in "${textArg}"`);
      continue;
    }
    const [rangeText, stepText, ...rest] = part.split('/');
    if (rest.length > 0) {
      problem(`"${part}" has more than one step`);
      continue;
    }
    let step = 1;
    if (stepText !== undefined) {
      if (!integerText.test(stepText) || Number(stepText) < 1 || Number(stepText) > specArg.max) {
        problem(`step "${stepText}" in "${part}" must be a whole number from 1 to ${specArg.max}`);
        continue;
      }
      step = Number(stepText);
    }
    let from: number;
    let to: number;
    if (rangeText === '*') {
      from = specArg.min;
      to = specArg.max;
    } else {
      const bounds = rangeText!.split('-');
      if (bounds.length > 2 || !bounds.every((boundArg) => integerText.test(boundArg))) {
        problem(`"${part}" is not a number, a range a-b, * or a step`);
        continue;
      }
      from = Number(bounds[0]);
      to = bounds.length === 2 ? Number(bounds[1]) : (stepText !== undefined ? specArg.max : from);
      const outside = [from, to].filter((valueArg) => !inRange(valueArg));
      if (outside.length > 0) {
        problem(`${outside[0]} is outside ${specArg.min}–${specArg.max}`);
        continue;
      }
      if (from > to) {
        problem(`range "${rangeText}" ends before it starts`);
        continue;
      }
    }
    for (let value = from; value <= to; value += step) {
      values.add(value);
    }
  }
  return { values, problems };
};

/** The expression parsed, or every problem it has (the field count first, then each field's). */
export const parseCron = (expressionArg: string): { schedule: ICronSchedule } | { problems: ICronProblem[] } => {
  if (expressionArg.length > maximumCronLength) {
    return { problems: [{ field: null, message: `must be at most ${maximumCronLength} characters` }] };
  }
  const parts = expressionArg.trim().split(/\s+/).filter((partArg) => partArg !== '');
  if (parts.length !== cronFields.length) {
    return {
      problems: [{
        field: null,
        message: `must have exactly 5 fields (minute hour day-of-month month day-of-week, in UTC), got ${parts.length}`,
      }],
    };
  }
  const parsed = parts.map((partArg, indexArg) => parseField(partArg, cronFields[indexArg]!));
  const problems = parsed.flatMap((fieldArg) => fieldArg.problems);
  if (problems.length > 0) {
    return { problems };
  }
  const [minutes, hours, daysOfMonth, months, daysOfWeekRaw] = parsed.map((fieldArg) => fieldArg.values);
  const daysOfWeek = new Set([...daysOfWeekRaw!].map((dayArg) => dayArg % 7));
  // A day-of-month no month in the set ever has (`0 0 31 2 *`) would never fire.
  const longestMonth = Math.max(...[...months!].map((monthArg) => [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][monthArg - 1]!));
  if (parts[4] === '*' && ![...daysOfMonth!].some((dayArg) => dayArg <= longestMonth)) {
    return { problems: [{ field: 'day-of-month', message: `no day in "${parts[2]}" exists in the months "${parts[3]}"` }] };
  }
  return {
    schedule: {
      minutes: minutes!,
      hours: hours!,
      daysOfMonth: daysOfMonth!,
      months: months!,
      daysOfWeek,
      anyDayOfMonth: parts[2]!.startsWith('*'),
      anyDayOfWeek: parts[4]!.startsWith('*'),
    },
  };
};

const dayMatches = (scheduleArg: ICronSchedule, dateArg: Date): boolean => {
  const byMonthDay = scheduleArg.daysOfMonth.has(dateArg.getUTCDate());
  const byWeekDay = scheduleArg.daysOfWeek.has(dateArg.getUTCDay());
  if (scheduleArg.anyDayOfMonth || scheduleArg.anyDayOfWeek) {
    return byMonthDay && byWeekDay;
  }
  return byMonthDay || byWeekDay;
};

const minuteMs = 60_000;

/**
 * The first occurrence strictly after `afterMs` (epoch ms, UTC), or null when none falls within
 * eight years (an expression like `0 0 29 2 1` may wait that long, never longer once parsed).
 * Walks by day, then by hour, then by minute, so even a rare expression costs a few thousand steps.
 */
export const nextOccurrence = (scheduleArg: ICronSchedule, afterMs: number): number | null => {
  const start = new Date(Math.floor(afterMs / minuteMs) * minuteMs + minuteMs);
  const limit = afterMs + 8 * 366 * 24 * 3_600_000;
  const date = new Date(start.getTime());
  while (date.getTime() <= limit) {
    if (!scheduleArg.months.has(date.getUTCMonth() + 1)) {
      date.setUTCMonth(date.getUTCMonth() + 1, 1);
      date.setUTCHours(0, 0, 0, 0);
      continue;
    }
    if (!dayMatches(scheduleArg, date)) {
      date.setUTCDate(date.getUTCDate() + 1);
      date.setUTCHours(0, 0, 0, 0);
      continue;
    }
    if (!scheduleArg.hours.has(date.getUTCHours())) {
      date.setUTCHours(date.getUTCHours() + 1, 0, 0, 0);
      continue;
    }
    if (!scheduleArg.minutes.has(date.getUTCMinutes())) {
      date.setUTCMinutes(date.getUTCMinutes() + 1, 0, 0);
      continue;
    }
    return date.getTime();
  }
  return null;
};

const dayMs = 86_400_000;

/** Walks occurrences in (afterMs, atMs]: the last and how many, or 'too-many' past `maximumSteps`. */
const walkOccurrences = (scheduleArg: ICronSchedule, afterMs: number, atMs: number, maximumSteps: number): { latest: number | null; count: number } | 'too-many' => {
  let latest: number | null = null;
  let count = 0;
  let cursor = afterMs;
  for (let step = 0; step <= maximumSteps; step++) {
    const next = nextOccurrence(scheduleArg, cursor);
    if (next === null || next > atMs) {
      return { latest, count };
    }
    latest = next;
    count += 1;
    cursor = next;
  }
  return 'too-many';
};

/**
 * The latest occurrence after `afterMs` and at or before `atMs`, and how many occurrences fell in
 * that span: the one missed occurrence a schedule runs after downtime, and how many it stands
 * for. Past `maximumSteps` occurrences (weeks of downtime on a per-minute schedule) the latest is
 * looked for in the last hour, day, month, year before `atMs`, and the count is the steps walked
 * plus that window's: a lower bound, which is what `missedOccurrences` then says.
 */
export const latestOccurrenceBetween = (
  scheduleArg: ICronSchedule,
  afterMs: number,
  atMs: number,
  maximumSteps = 20_000,
): { latest: number; count: number } | null => {
  const whole = walkOccurrences(scheduleArg, afterMs, atMs, maximumSteps);
  if (whole !== 'too-many') {
    return whole.latest === null ? null : { latest: whole.latest, count: whole.count };
  }
  for (const windowMs of [3_600_000, dayMs, 32 * dayMs, 400 * dayMs, 8 * 366 * dayMs]) {
    const tail = walkOccurrences(scheduleArg, Math.max(afterMs, atMs - windowMs), atMs, maximumSteps);
    if (tail !== 'too-many' && tail.latest !== null) {
      return { latest: tail.latest, count: maximumSteps + tail.count };
    }
  }
  return null;
};

/**
 * The documented jitter: a schedule with `jitterSeconds: J` fires each occurrence at a fixed
 * offset in [0, J) seconds after its minute, the same on every instance (derived from the
 * schedule's id and the occurrence), so a fleet of schedules at `0 2 * * *` does not hit every
 * relay in the same second, and the offset of one occurrence never changes between looks.
 */
export const jitterOffsetMs = (scheduleIdArg: string, occurrenceArg: number, jitterSecondsArg: number): number => {
  if (jitterSecondsArg <= 0) {
    return 0;
  }
  let hash = 2166136261;
  for (const char of `${scheduleIdArg}\u0000${occurrenceArg}`) {
    hash ^= char.charCodeAt(0);
    hash = Math.imul(hash, 16777619) >>> 0;
  }
  return hash % (jitterSecondsArg * 1000);
};
