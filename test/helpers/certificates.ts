import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';

/**
 * A tiny certificate authority for TLS tests, made with the system's `openssl`: a self-signed root
 * and leaf certificates it signs, with the names and validity a test asks for (an expired one
 * included, through `openssl ca`'s explicit dates).
 */

export interface ITestCertificate {
  certFile: string;
  keyFile: string;
  certPem: string;
  keyPem: string;
}

export interface ITestCa extends ITestCertificate {
  dir: string;
  /** Signs a leaf for `namesArg` (DNS names or IP addresses); `validity` defaults to now … +30 days. */
  issue(nameArg: string, namesArg: string[], optionsArg?: { startDate?: Date; endDate?: Date }): Promise<ITestCertificate>;
  remove(): Promise<void>;
}

const openssl = (argsArg: string[], cwdArg: string): void => {
  execFileSync('openssl', argsArg, { cwd: cwdArg, stdio: ['ignore', 'ignore', 'pipe'] });
};

/** openssl ca's date format: YYYYMMDDHHMMSSZ. */
const opensslDate = (dateArg: Date): string => `${dateArg.toISOString().replace(/[-:T]/g, '').slice(0, 14)}Z`;

const ipPattern = /^(\d{1,3}\.){3}\d{1,3}$|:/;

export const makeTestCa = async (commonNameArg = 'Cloudly Test CA'): Promise<ITestCa> => {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-ca-'));
  const certFile = path.join(dir, 'ca.pem');
  const keyFile = path.join(dir, 'ca.key');
  openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', keyFile, '-out', certFile,
    '-subj', `/CN=${commonNameArg}`, '-days', '30', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], dir);
  await fsp.writeFile(path.join(dir, 'index.txt'), '');
  await fsp.writeFile(path.join(dir, 'serial'), '1000\n');
  await fsp.mkdir(path.join(dir, 'issued'));
  await fsp.writeFile(path.join(dir, 'ca.cnf'), [
    '[ca]', 'default_ca = test_ca',
    '[test_ca]', `dir = ${dir}`, 'database = $dir/index.txt', 'new_certs_dir = $dir/issued', 'serial = $dir/serial',
    'certificate = $dir/ca.pem', 'private_key = $dir/ca.key', 'default_md = sha256', 'policy = any_name',
    'copy_extensions = copy', 'unique_subject = no', 'default_days = 30',
    '[any_name]', 'commonName = supplied',
  ].join('\n'));
  let issued = 0;
  const ca: ITestCa = {
    dir,
    certFile,
    keyFile,
    certPem: fs.readFileSync(certFile, 'utf8'),
    keyPem: fs.readFileSync(keyFile, 'utf8'),
    async issue(nameArg, namesArg, optionsArg = {}) {
      const base = path.join(dir, `leaf-${++issued}`);
      const altNames = namesArg.map((name) => (ipPattern.test(name) ? `IP:${name}` : `DNS:${name}`)).join(',');
      openssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${base}.key`, '-out', `${base}.csr`,
        '-subj', `/CN=${nameArg}`, '-addext', `subjectAltName=${altNames}`, '-addext', 'extendedKeyUsage=serverAuth'], dir);
      const start = optionsArg.startDate ?? new Date(Date.now() - 60_000);
      const end = optionsArg.endDate ?? new Date(Date.now() + 30 * 24 * 3600_000);
      openssl(['ca', '-batch', '-notext', '-config', path.join(dir, 'ca.cnf'), '-in', `${base}.csr`, '-out', `${base}.pem`,
        '-startdate', opensslDate(start), '-enddate', opensslDate(end)], dir);
      return {
        certFile: `${base}.pem`,
        keyFile: `${base}.key`,
        certPem: fs.readFileSync(`${base}.pem`, 'utf8'),
        keyPem: fs.readFileSync(`${base}.key`, 'utf8'),
      };
    },
    async remove() {
      await fsp.rm(dir, { recursive: true, force: true });
    },
  };
  return ca;
};

/**
 * Puts a certificate and key where a server reads them, replacing what is there by rename (as
 * certbot and Kubernetes do), so a reader never sees half a file.
 */
export const installCertificate = async (sourceArg: { certPem: string; keyPem: string }, certFileArg: string, keyFileArg: string): Promise<void> => {
  await fsp.writeFile(`${keyFileArg}.new`, sourceArg.keyPem, { mode: 0o600 });
  await fsp.writeFile(`${certFileArg}.new`, sourceArg.certPem);
  await fsp.rename(`${keyFileArg}.new`, keyFileArg);
  await fsp.rename(`${certFileArg}.new`, certFileArg);
};
