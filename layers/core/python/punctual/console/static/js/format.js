// Times, durations and schedules in words.

export const ms = (iso) => (iso ? Date.parse(iso) : null);

export function when(iso) {
  if (!iso) return "—";
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`;
}

export function duration(millis) {
  if (millis === null || millis === undefined || Number.isNaN(millis)) return "—";
  const sign = millis < 0 ? "-" : "";
  const abs = Math.abs(millis);
  if (abs < 1000) return `${sign}${Math.round(abs)} ms`;
  if (abs < 60_000) return `${sign}${(abs / 1000).toFixed(abs < 10_000 ? 2 : 1)} s`;
  if (abs < 3_600_000) return `${sign}${Math.floor(abs / 60_000)} min ${Math.round((abs % 60_000) / 1000)} s`;
  return `${sign}${(abs / 3_600_000).toFixed(1)} h`;
}

export function scheduleInWords(job) {
  if (!job.schedule) return job.run_at ? `once at ${when(job.run_at)}` : "on demand";
  let words = job.schedule;
  try {
    words = window.cronstrue.toString(job.schedule, { use24HourTimeFormat: true, verbose: false });
  } catch (_error) {
    // an expression cronstrue does not know (e.g. a Punctual extension): show it as written
  }
  return `${words} (${job.timezone})`;
}

export function percentile(sorted, q) {
  if (!sorted.length) return null;
  const rank = Math.max(0, Math.min(sorted.length - 1, Math.ceil((q / 100) * sorted.length) - 1));
  return sorted[rank];
}

export const lateness = (run) => (run.started_at ? ms(run.started_at) - ms(run.scheduled_at) : null);
