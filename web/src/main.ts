/** The dashboard bundle's entry: registers every component; index.html holds <cloudly-app>. */
import './widgets.js';
import './secret.js';
import './pages/fleet.js';
import './pages/cluster.js';
import './pages/service.js';
import './forms.js';
import './pages/audit.js';
import './pages/operations.js';
import './pages/users.js';
import './pages/network.js';
import './pages/rollouts.js';
import './pages/secrets.js';
import './pages/backups.js';
import './app.js';
