/** The storage suite (suite.ts) on the `database` back end. */
import t from 'tap';
import { storageSuite } from './suite.ts';

storageSuite(t, 'database');
