/** The storage suite (suite.ts) on the `disk` back end. */
import t from 'tap';
import { storageSuite } from './suite.ts';

storageSuite(t, 'disk');
